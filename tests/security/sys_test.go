//go:build integration

package security_test

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// atime is a file's access time.
func atime(path string) time.Time {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return time.Time{}
	}
	return time.Unix(st.Atim.Sec, st.Atim.Nsec)
}

// ttyAttr makes the child a session leader whose controlling terminal is
// its stdin.
func ttyAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}

// openPty opens a pseudo-terminal pair: the master and the slave.
func openPty() (*os.File, *os.File, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err := os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

func itoa(i int) string {
	b := []byte{}
	if i == 0 {
		return "0"
	}
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}

// statUID is the owner of a file.
func statUID(fi os.FileInfo) int {
	if fi == nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return 0
}
