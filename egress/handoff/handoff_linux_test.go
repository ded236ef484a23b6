package handoff

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/egress/nsinit"
)

// TestListenPrivateDial: the private folder is 0700, the socket 0600 and
// named for nsinit; a connection made by Dial reaches the listener the
// file stands for; cleanup removes both.
func TestListenPrivateDial(t *testing.T) {
	path, file, cleanup, err := ListenPrivate(-1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if filepath.Base(path) != nsinit.SocketName {
		t.Errorf("socket %s: want the name %s", path, nsinit.SocketName)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("folder %s: %v, %v; want 0700", filepath.Dir(path), fi.Mode(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %s: %v, %v; want a 0600 socket", path, fi.Mode(), err)
	}
	ln, err := net.FileListener(file)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	conn, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := <-accepted; err != nil {
		t.Errorf("the listener saw no connection: %v", err)
	}
	cleanup()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s (%v)", filepath.Dir(path), err)
	}
}

// TestDialRefusesOtherNames: only a socket named for nsinit is dialled.
func TestDialRefusesOtherNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "other.sock")
	l, err := Listen(p, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Dial(p); err == nil || !strings.Contains(err.Error(), nsinit.SocketName) {
		t.Errorf("Dial(%s) = %v, want a refusal naming %s", p, err, nsinit.SocketName)
	}
}
