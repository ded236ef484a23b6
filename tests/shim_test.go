//go:build integration

package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runc "github.com/containerd/go-runc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// lastRuntimeError reads the --log file the way containerd's shim does
// (pkg/process getLastRuntimeError): the msg of the last error-level JSON
// line.
func lastRuntimeError(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("shim log %s: %v", path, err)
	}
	defer f.Close()
	var msg string
	dec := json.NewDecoder(f)
	for {
		var l struct{ Level, Msg, Time string }
		if err := dec.Decode(&l); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("shim log %s is not a stream of JSON objects: %v", path, err)
			}
			break
		}
		if l.Level == "error" {
			msg = l.Msg
		}
	}
	return msg
}

// lineReader delivers lines of a pipe on a channel.
func lineReader(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

func expectOn(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("container stdout closed before %q (saw %q)", want, seen)
			}
			if strings.TrimRight(l, "\r") == want {
				return
			}
			seen = append(seen, l)
		case <-timeout:
			t.Fatalf("no %q on the container's stdout within 10s (saw %q)", want, seen)
		}
	}
}

// TestShimView drives the runtime through go-runc exactly as containerd's
// runc shim v2 does, with the shim's global flags, pipes and pid files.
func TestShimView(t *testing.T) {
	needRoot(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := newBundle(t, nil, waiter...)
	root := filepath.Join(tempDir(t), "runc-ns")
	logPath := filepath.Join(b.dir, "log.json")
	r := &runc.Runc{Command: runtimeBin, Root: root, Log: logPath, LogFormat: runc.JSON}
	rr := &rt{t: t, root: root}
	id := uniqueID(t)
	c := rr.newContainer(b, id) // cleanup through the CLI

	pio, err := runc.NewPipeIO(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pio.Close()
	stdout := lineReader(pio.Stdout())
	pidFile := filepath.Join(b.dir, "init.pid")
	if err := r.Create(ctx, id, b.dir, &runc.CreateOpts{PidFile: pidFile, IO: pio}); err != nil {
		t.Fatalf("go-runc Create: %v (log: %q)", err, lastRuntimeError(t, logPath))
	}
	pid := readPidFile(t, pidFile)
	c.setPid(pid)
	st, err := r.State(ctx, id)
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if st.Status != "created" || st.Pid != pid || st.Bundle != b.dir || st.ID != id {
		t.Errorf("State after Create = %+v, want created pid %d", st, pid)
	}

	if err := r.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	expectOn(t, stdout, "ready")
	if st, err = r.State(ctx, id); err != nil || st.Status != "running" {
		t.Errorf("State after Start = %+v, %v", st, err)
	}
	ps, err := r.Ps(ctx, id)
	if err != nil || !containsInt(ps, pid) {
		t.Errorf("Ps = %v, %v; want it to contain %d", ps, err, pid)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Errorf("List = %+v, %v", list, err)
	}

	if err := r.Pause(ctx, id); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if st, _ = r.State(ctx, id); st.Status != "paused" {
		t.Errorf("State after Pause: %q", st.Status)
	}
	if err := r.Resume(ctx, id); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if st, _ = r.State(ctx, id); st.Status != "running" {
		t.Errorf("State after Resume: %q", st.Status)
	}

	limit := int64(77)
	if err := r.Update(ctx, id, &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &limit}}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := c.cgroupFile("pids", "pids.max"); got != "77" {
		t.Errorf("after Update pids 77: pids.max %s", got)
	}

	// exec as the shim does: process JSON file, --detach, --pid-file, pipes
	eio, err := runc.NewPipeIO(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer eio.Close()
	eout := lineReader(eio.Stdout())
	execPid := filepath.Join(b.dir, "exec.pid")
	proc := specs.Process{Args: []string{"sh", "-c", "echo exec-ok; exec sleep 999"}, Cwd: "/", Env: []string{"PATH=/bin"}}
	if err := r.Exec(ctx, id, proc, &runc.ExecOpts{PidFile: execPid, Detach: true, IO: eio}); err != nil {
		t.Fatalf("Exec: %v (log: %q)", err, lastRuntimeError(t, logPath))
	}
	expectOn(t, eout, "exec-ok")
	epid := readPidFile(t, execPid)
	if !pidAlive(epid) {
		t.Fatalf("exec pid %d not alive", epid)
	}
	if ps, _ = r.Ps(ctx, id); !containsInt(ps, epid) {
		t.Errorf("Ps %v lacks exec pid %d", ps, epid)
	}

	// kill --all 10 (USR1): the exec'd sleep dies of it, init reports it
	if err := r.Kill(ctx, id, 10, &runc.KillOpts{All: true}); err != nil {
		t.Fatalf("Kill --all USR1: %v", err)
	}
	expectOn(t, stdout, "got-USR1")
	if !waitPidGone(epid, 5*time.Second) {
		t.Errorf("exec pid %d survived kill --all", epid)
	}
	if err := r.Kill(ctx, id, 15, nil); err != nil {
		t.Fatalf("Kill 15: %v", err)
	}
	expectOn(t, stdout, "got-TERM")
	c.waitStatus("stopped", 10*time.Second)
	if !waitPidGone(pid, 5*time.Second) {
		t.Errorf("init %d alive after it stopped", pid)
	}
	// killing a stopped container: the shim matches these texts
	if err := r.Kill(ctx, id, 9, nil); err != nil {
		if msg := lastRuntimeError(t, logPath); !strings.Contains(msg, "not running") && !strings.Contains(msg, "process already finished") && !strings.Contains(msg, "no such process") {
			t.Errorf("Kill of a stopped container failed with %q; the shim only tolerates not running / process already finished / no such process", msg)
		}
	}

	if err := r.Delete(ctx, id, &runc.DeleteOpts{}); err != nil {
		t.Fatalf("Delete: %v (log: %q)", err, lastRuntimeError(t, logPath))
	}
	assertNoTrace(t, rr, id, pid, b.dir)

	// what containerd does next: delete --force of the gone container must
	// either succeed (runc 1.1) or fail with "does not exist"
	if err := r.Delete(ctx, id, &runc.DeleteOpts{Force: true}); err != nil {
		msg := lastRuntimeError(t, logPath)
		if !strings.Contains(err.Error()+msg, "does not exist") {
			t.Errorf("Delete --force of a deleted container: %v, log %q; want text containing %q", err, msg, "does not exist")
		}
	}
	// plain delete, state and kill of the gone container must fail that way
	if err := r.Delete(ctx, id, &runc.DeleteOpts{}); err == nil {
		t.Errorf("Delete of a deleted container succeeded")
	} else if msg := lastRuntimeError(t, logPath); !strings.Contains(msg, "does not exist") {
		t.Errorf("Delete of a deleted container: last log error %q, want %q", msg, "does not exist")
	}
	for name, call := range map[string]func() error{
		"State": func() error { _, err := r.State(ctx, id); return err },
		"Kill":  func() error { return r.Kill(ctx, id, 15, nil) },
		"Ps":    func() error { _, err := r.Ps(ctx, id); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s of a deleted container succeeded", name)
		} else if msg := lastRuntimeError(t, logPath); !strings.Contains(msg, "container does not exist") {
			t.Errorf("%s of a deleted container: last log error %q, want %q", name, msg, "container does not exist")
		}
	}
}

// TestShimTTY: create with --console-socket through go-runc, as `ctr run -t`.
func TestShimTTY(t *testing.T) {
	needRoot(t)
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := newBundle(t, nil, "sh", "-c", `[ -t 1 ] && echo tty-yes; read x; echo "read:$x"`)
	b.spec.Process.Terminal = true
	b.save()
	root := filepath.Join(tempDir(t), "runc-ns")
	logPath := filepath.Join(b.dir, "log.json")
	r := &runc.Runc{Command: runtimeBin, Root: root, Log: logPath, LogFormat: runc.JSON}
	rr := &rt{t: t, root: root}
	id := uniqueID(t)
	c := rr.newContainer(b, id)
	sock, err := runc.NewTempConsoleSocket()
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	pidFile := filepath.Join(b.dir, "init.pid")
	type got struct {
		f   io.ReadWriteCloser
		err error
	}
	ch := make(chan got, 1)
	go func() {
		m, err := sock.ReceiveMaster()
		ch <- got{m, err}
	}()
	if err := r.Create(ctx, id, b.dir, &runc.CreateOpts{PidFile: pidFile, ConsoleSocket: sock}); err != nil {
		t.Fatalf("Create with console socket: %v (log %q)", err, lastRuntimeError(t, logPath))
	}
	var m got
	select {
	case m = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no pty master received within 10s")
	}
	if m.err != nil {
		t.Fatalf("ReceiveMaster: %v", m.err)
	}
	defer m.f.Close()
	c.setPid(readPidFile(t, pidFile))
	if err := r.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	lines := lineReader(m.f)
	expectOn(t, lines, "tty-yes")
	io.WriteString(m.f, "hello\n")
	expectOn(t, lines, "read:hello")
	c.waitStatus("stopped", 10*time.Second)
	if err := r.Delete(ctx, id, nil); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	assertNoTrace(t, rr, id, c.pid, b.dir)
}
