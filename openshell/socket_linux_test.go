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
	cases := map[string]struct{ path, want string }{
		"symlinked directory": {filepath.Join(link, "s.sock"), "not a symlink"},
		"regular file":        {file, "not a Unix socket"},
		"empty path":          {"", "empty"},
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
	if _, err := os.Lstat(filepath.Join(real, "s.sock")); err == nil {
		t.Error("a socket was created through the symlink")
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
