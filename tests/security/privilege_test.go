//go:build integration

package security_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcSetuid: setuid-root binaries (planted in the skill folder, and
// those of the host's /usr) never give a sandbox process another host
// uid: the host samples every sandbox process' effective uid.
func TestProcSetuid(t *testing.T) {
	probe(t, "proc/setuid", func(p *P, m *mode) {
		sk := pyProbe(p, m, "suid", `
import subprocess
tok = sys.argv[1]
r = subprocess.run(["/skill/bin/sleep", "1." + "".join(c for c in tok if c.isdigit())[:6] + "1"], capture_output=True)
OUT["setuid sleep exit"] = r.returncode
r = subprocess.run(["/skill/bin/python3", "-S", "-c", "import os,time; print(os.getuid(), os.geteuid()); time.sleep(0.5)"], capture_output=True, text=True)
OUT["setuid python ids"] = r.stdout.strip() or r.stderr.strip()
for b in REQ["usr"]:
    try:
        pr = subprocess.Popen([b], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(0.3)
        try:
            OUT["ids " + b] = [l for l in open("/proc/%d/status" % pr.pid) if l.startswith("Uid:")][0].split()[1:3]
        except (OSError, IndexError):
            OUT["ids " + b] = "exited"
        pr.kill()
        OUT["exit " + b] = pr.wait()
    except OSError as e:
        OUT["exit " + b] = "errno %d" % e.errno
done()
`, "")
		os.MkdirAll(filepath.Join(sk.dir, "bin"), 0o755)
		for name, src := range map[string]string{"sleep": "/usr/bin/sleep", "python3": "/usr/bin/python3"} {
			dst := filepath.Join(sk.dir, "bin", name)
			b, err := os.ReadFile(src)
			if err != nil {
				p.Fatalf("%v", err)
			}
			if err := os.WriteFile(dst, b, 0o755); err != nil {
				p.Fatalf("%v", err)
			}
			os.Chown(dst, 0, 0)
			if err := os.Chmod(dst, 0o4755|os.ModeSetuid); err != nil {
				p.Fatalf("%v", err)
			}
		}
		var usr []string
		for _, b := range []string{"/usr/bin/su", "/usr/bin/passwd", "/usr/bin/newgrp", "/usr/bin/chsh", "/usr/bin/gpasswd", "/usr/bin/mount", "/usr/bin/newuidmap"} {
			if fi, err := os.Stat(b); err == nil && fi.Mode()&os.ModeSetuid != 0 {
				usr = append(usr, b)
			}
		}
		var mu sync.Mutex
		sawSleep := false
		var s *sampler
		// The host samples the sandbox's processes every 5 ms.
		o := m.run(p, sk, runOpts{input: mustJSON(map[string]any{"usr": usr}), during: func() {
			s = startSampler(sk, m, func(ps []procInfo) {
				for _, pi := range ps {
					if strings.HasPrefix(pi.cmdline, "/skill/bin/sleep ") {
						mu.Lock()
						sawSleep = true
						mu.Unlock()
					}
				}
			})
		}})
		if s != nil {
			s.Stop()
		}
		o.wantCode(p, 0)
		out := o.out(p)
		if !sawSleep {
			p.Fatalf("the host never saw the setuid helper run (%d looks): the probe proves nothing", s.looks)
		}
		for _, pi := range s.elevated {
			p.Errorf("LEAK: sandbox process %d (%s) ran with host euid %d (real uid %d)", pi.pid, pi.cmdline, pi.euid, pi.ruid)
		}
		if ids := str(out, "setuid python ids"); ids != "0 0" {
			p.Errorf("LEAK: the setuid python in the skill folder ran with ids %q inside (want \"0 0\": not elevated)", ids)
		}
	})
}

// TestProcTIOCSTI: the skill cannot push characters into the caller's
// terminal (skillrun runs with a pty as its controlling terminal), and
// TIOCSTI is denied even on a terminal the skill owns.
func TestProcTIOCSTI(t *testing.T) {
	probe(t, "proc/tiocsti", func(p *P, m *mode) {
		needAmd64(p)
		master, slave, err := openPty()
		if err != nil {
			p.Skipf("skipped: no pseudo-terminal: %v", err)
		}
		defer master.Close()
		defer slave.Close()
		if m.rootless() {
			os.Chown(slave.Name(), m.uid, m.gid)
		}
		var buf bytes.Buffer
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(&buf, master) }()
		inject := "INJ" + randHex(6)
		sk := pyProbe(p, m, "sti", `
import fcntl, termios, struct
tok = REQ["inject"].encode()
def sti(fd):
    for ch in tok + b"\n":
        fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
for fd in range(0, 10):
    attempt("tiocsti fd %d" % fd, lambda fd=fd: sti(fd))
def devtty():
    sti(os.open("/dev/tty", os.O_RDWR))
attempt("tiocsti /dev/tty", devtty)
def own():
    mfd = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(mfd, 0x40045431, struct.pack("i", 0))  # TIOCSPTLCK
    n = struct.unpack("i", fcntl.ioctl(mfd, 0x80045430, b"\0" * 4))[0]
    s = os.open("/dev/pts/%d" % n, os.O_RDWR)
    attempt("own TIOCSCTTY", lambda: fcntl.ioctl(s, 0x540E, 0) and None)
    fcntl.ioctl(s, termios.TIOCSTI, b"x")
attempt("tiocsti own pty", own)
c = ctypes.c_char(b"x")
OUT["tiocsti high bits fd 0"] = "errno %d" % sc(16, 0, 0x100005412, ctypes.byref(c))
OUT["tioclinux fd 0"] = "errno %d" % sc(16, 0, 0x541C, ctypes.byref(ctypes.c_char(b"\x06")))
done()
`, "")
		m.run(p, sk, runOpts{args: []string{"skill", "run", "--input", mustJSON(map[string]any{"inject": inject}), sk.dir}, tty: slave})
		inq, _ := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCINQ)
		slave.Close()
		// Drain first: the reader stops with EIO once every byte the
		// run wrote is read (closing the master now could cut the
		// result short).
		drained := make(chan struct{})
		go func() { wg.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(10 * time.Second):
		}
		master.Close()
		wg.Wait()
		term := buf.String()
		p.Logf("terminal: %q", term)
		if strings.Contains(term, inject) && !strings.Contains(term, `"`+inject) {
			p.Errorf("LEAK: characters injected from the sandbox reached the caller's terminal: %q", term)
		}
		if inq != 0 {
			p.Errorf("LEAK: %d characters are waiting in the caller's terminal input queue after the run", inq)
		}
		i := strings.Index(term, "{")
		var res skillResult
		var out map[string]any
		if i < 0 || json.NewDecoder(strings.NewReader(term[i:])).Decode(&res) != nil || json.Unmarshal(res.Output, &out) != nil || out == nil {
			p.Fatalf("no result on the terminal: %q", term)
		}
		for k := range out {
			v := str(out, k)
			switch {
			case k == "own TIOCSCTTY":
			case k == "tiocsti /dev/tty":
				if v != "errno 6" && !denied(v) { // ENXIO: no controlling terminal
					p.Errorf("LEAK: %s = %s", k, v)
				}
			case strings.HasPrefix(k, "tiocsti fd "):
				if v != "errno 9" && !denied(v) { // EBADF: no such fd
					p.Errorf("LEAK: %s = %s, want EPERM", k, v)
				}
			default:
				if !denied(v) {
					p.Errorf("LEAK: %s = %s, want EPERM (seccomp)", k, v)
				}
			}
		}
	})
}
