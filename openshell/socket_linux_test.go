//go:build linux

package openshell

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestListenPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	sock := filepath.Join(dir, "driver.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("directory mode %o, want 700", m)
	}
	if m := mode(t, sock); m != 0o600 {
		t.Errorf("socket mode %o, want 600", m)
	}
	l.Close()
	// A stale socket of ours is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	l, err = Listen(sock)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l.Close()
}

func TestListenRefuses(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(real, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777) // no sticky bit
	cases := map[string]struct{ path, want string }{
		"symlinked directory":     {filepath.Join(link, "s.sock"), "not a symlink"},
		"symlinked ancestor":      {filepath.Join(link, "sub", "s.sock"), "not a symlink"},
		"world-writable ancestor": {filepath.Join(open, "sub", "s.sock"), "writable by group or others"},
		"regular file":            {file, "not a Unix socket"},
		"empty path":              {"", "empty"},
	}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases["directory of another user"] = struct{ path, want string }{filepath.Join(other, "s.sock"), "owned by uid 65534"}
	} else {
		t.Log("directory-of-another-user case needs root: not run")
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := Listen(c.path)
			if err == nil {
				l.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "keep" {
		t.Errorf("the regular file was touched: %q %v", data, err)
	}
	for _, p := range []string{filepath.Join(real, "s.sock"), filepath.Join(real, "sub"), filepath.Join(open, "sub")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	// With the sticky bit (as /tmp), others cannot rename our directory.
	os.Chmod(open, 0o777|os.ModeSticky)
	l, err := Listen(filepath.Join(open, "sub", "s.sock"))
	if err != nil {
		t.Fatalf("below a sticky world-writable directory: %v", err)
	}
	l.Close()
}

// TestListenLiveSocket: a socket another process serves is left alone
// (probe-connected, not unlinked), and keeps serving.
func TestListenLiveSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "s.sock")
	l1, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	go func() {
		for {
			c, err := l1.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("first"))
			c.Close()
		}
	}()
	before, _ := os.Lstat(sock)
	if l2, err := Listen(sock); err == nil {
		l2.Close()
		t.Fatal("a live socket was replaced")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("error %q does not say the socket is in use", err)
	}
	after, err := os.Lstat(sock)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the live socket file changed: %v", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the first listener no longer serves: %v", err)
	}
	buf := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c.Read(buf); string(buf[:n]) != "first" {
		t.Errorf("read %q from the first listener", buf[:n])
	}
	c.Close()
}

// TestListenSocketOfAnotherUser: a (stale) socket owned by another uid is
// refused and left in place.
func TestListenSocketOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to give a socket to another uid)")
	}
	dir := filepath.Join(t.TempDir(), "run")
	os.Mkdir(dir, 0o700)
	sock := filepath.Join(dir, "s.sock")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if err := os.Lchown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if l, err := Listen(sock); err == nil {
		l.Close()
		t.Fatal("a socket of uid 65534 was replaced")
	} else if !strings.Contains(err.Error(), "not a Unix socket owned by uid 0") {
		t.Errorf("error %q", err)
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("the other user's socket was touched: %v %v", fi, err)
	}
}

// TestListenPeerUID proves the SO_PEERCRED check on its own: the file
// modes are opened up so that another user can connect, and its
// connection must still be dropped.
func TestListenPeerUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (to connect as another user)")
	}
	py := "/usr/bin/python3"
	_, err := os.Stat(py)
	if err != nil {
		t.Skip("needs /usr/bin/python3 (a Unix socket client run as another user)")
	}
	base, err := os.MkdirTemp("", "peeruid")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "run")
	sock := filepath.Join(dir, "s.sock")
	l, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{base, dir} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(sock, 0o666)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			accepted <- c
		}
	}()
	// Another user: connects (modes allow it) but reads EOF, never hello.
	cmd := exec.Command(py, "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1]); print("connected")
print("read", repr(s.recv(100)))`, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("other user client: %q (%v)", out, err)
	if !strings.Contains(string(out), "connected") {
		t.Fatalf("the other user could not even connect, the test proves nothing: %q", out)
	}
	if strings.Contains(string(out), "hello") || !strings.Contains(string(out), "read b''") {
		t.Fatalf("a peer of uid 65534 was accepted: %q", out)
	}
	select {
	case <-accepted:
		t.Fatal("Accept returned the other user's connection")
	case <-time.After(100 * time.Millisecond):
	}
	// Our own user is accepted.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case a := <-accepted:
		a.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("own connection not accepted")
	}
}
