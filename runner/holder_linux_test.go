//go:build linux

package runner

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillrun/skillrun/runner/holder"
)

// holder runs the input holder with the entry point sh -c script, as
// Launch wires it (fd 3: a copy of stdin's write end, 4: ready, 5:
// control), in a new pid namespace of its own like a sandbox's (its
// "kill -KILL -1" must not reach anything else). It returns once the
// holder said it is ready.
type holderRun struct {
	cmd    *exec.Cmd
	stdinW *os.File
	ctlW   *os.File
	out    bytes.Buffer
	dir    string
	// ready is the ready pipe's read end, past the holder's "r".
	ready *os.File
}

// holderKind is one implementation of the holder: the shell script or
// the binary's own (runner/holder, which this test binary links).
type holderKind struct {
	name string
	args func(mode string, entry ...string) []string
}

var holderKinds = []holderKind{
	{"shell", func(mode string, entry ...string) []string { return holderArgs(nil, mode, entry) }},
	{"builtin", func(mode string, entry ...string) []string { return holder.Args("/proc/self/exe", mode, entry...) }},
}

// eachHolder runs test for each holder, which start starts.
func eachHolder(t *testing.T, test func(t *testing.T, start func(mode, script string) *holderRun)) {
	for _, k := range holderKinds {
		t.Run(k.name, func(t *testing.T) {
			if k.name == "builtin" && !holder.Linked() {
				t.Skip("skipped: this binary has no built-in holder (built without cgo, or not for glibc)")
			}
			test(t, func(mode, script string) *holderRun { return startHolder(t, k, mode, script) })
		})
	}
}

func startHolder(t *testing.T, k holderKind, mode, script string) *holderRun {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (a pid namespace for the holder)")
	}
	h := &holderRun{dir: t.TempDir()}
	stdinR, stdinW, _ := os.Pipe()
	readyR, readyW, _ := os.Pipe()
	ctlR, ctlW, _ := os.Pipe()
	h.stdinW, h.ctlW = stdinW, ctlW
	args := k.args(mode, "/bin/sh", "-c", script)
	h.cmd = exec.Command(args[0], args[1:]...)
	h.cmd.Env = []string{"PATH=/usr/bin:/bin", "DIR=" + h.dir}
	h.cmd.Stdin = stdinR
	h.cmd.Stdout = &h.out
	h.cmd.ExtraFiles = []*os.File{stdinW, readyW, ctlR}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.cmd.Process.Kill(); _ = h.cmd.Wait() })
	stdinR.Close()
	readyW.Close()
	ctlR.Close()
	var b [1]byte
	if n, _ := readyR.Read(b[:]); n != 1 || b[0] != 'r' {
		t.Fatal("the holder never said it was ready")
	}
	h.ready = readyR
	t.Cleanup(func() { readyR.Close() })
	return h
}

func (h *holderRun) exists(name string) bool {
	_, err := os.Stat(filepath.Join(h.dir, name))
	return err == nil
}

func (h *holderRun) wait(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the holder did not exit")
	}
	return h.cmd.ProcessState.ExitCode()
}

// The entry point sees the end of its input only when the launcher says
// the input is complete ("e"), although the launcher closed its end.
func TestHolderEndsInputOnlyWhenTold(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("launch", `x=$(cat); echo "got:$x"; echo ran > "$DIR/ran"`)
		h.stdinW.Write([]byte(`{"a":1}`))
		h.stdinW.Close()
		time.Sleep(300 * time.Millisecond)
		if h.exists("ran") {
			t.Fatal("the entry point saw the end of its input before the launcher said so")
		}
		h.ctlW.Write([]byte("e\n"))
		h.ctlW.Close()
		if code := h.wait(t); code != 0 || h.out.String() != "got:{\"a\":1}\n" {
			t.Errorf("exit %d, output %q", code, h.out.String())
		}
	})
}

// A launcher that dies (its pipe ends without "e") never lets the entry
// point run on an empty input: the holder kills it first, exits 125.
func TestHolderLauncherDeathKillsEntry(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		for _, partial := range []string{"", `{"a":`} {
			h := start("launch", `x=$(cat); echo ran > "$DIR/ran"`)
			h.stdinW.Write([]byte(partial))
			h.stdinW.Close() // as the kernel does for a dead process: both ends at once
			h.ctlW.Close()
			if code := h.wait(t); code != 125 {
				t.Errorf("input %q: holder exit %d, want 125", partial, code)
			}
			time.Sleep(200 * time.Millisecond)
			if h.exists("ran") {
				t.Errorf("input %q: the entry point ran after its launcher died", partial)
			}
		}
	})
}

// EntryAtCall: nothing of the skill runs before "g".
func TestHolderCallModeStartsAtCall(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("call", `echo > "$DIR/started"; x=$(cat); echo "got:$x"`)
		time.Sleep(300 * time.Millisecond)
		if h.exists("started") {
			t.Fatal("the entry point started before the call")
		}
		h.ctlW.Write([]byte("g\n"))
		h.stdinW.Write([]byte("in"))
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		h.ctlW.Close()
		if code := h.wait(t); code != 0 || h.out.String() != "got:in\n" || !h.exists("started") {
			t.Errorf("exit %d, output %q", code, h.out.String())
		}
		// And a launcher gone before "g": the entry point never starts.
		h = start("call", `echo > "$DIR/started"`)
		h.ctlW.Close()
		h.stdinW.Close()
		if code := h.wait(t); code != 125 || h.exists("started") {
			t.Errorf("launcher gone before the call: exit %d, started %v", code, h.exists("started"))
		}
	})
}

// The holder exits with the entry point's status, 128+N for signal N,
// and reports it first on its ready pipe ("xN"), the entry point's output
// complete by then; nothing more is written to the ready pipe.
func TestHolderStatus(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		for script, want := range map[string]int{`cat >/dev/null; echo out; exit 7`: 7, `cat >/dev/null; echo out; kill -SEGV $$`: 139} {
			h := start("launch", script)
			h.stdinW.Close()
			h.ctlW.Write([]byte("e\n"))
			h.ctlW.Close()
			if code := h.wait(t); code != want {
				t.Errorf("%s: exit %d, want %d", script, code, want)
			}
			rest, _ := io.ReadAll(h.ready)
			if got := string(rest); got != fmt.Sprintf("x%d\n", want) {
				t.Errorf("%s: the ready pipe said %q after r, want the status x%d", script, got, want)
			}
			if h.out.String() != "out\n" {
				t.Errorf("%s: output %q", script, h.out.String())
			}
		}
	})
}

// Command mode: nothing runs before the command line; the line (quoted
// by shellQuote, working directory first) replaces the holder's own
// command, whatever quotes and shell syntax its words hold; the input
// follows.
func TestHolderCommandMode(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("cmd", `echo > "$DIR/placeholder-ran"`)
		time.Sleep(200 * time.Millisecond)
		if h.exists("placeholder-ran") {
			t.Fatal("something ran before the command")
		}
		words := []string{h.dir, "/bin/sh", "-c", `x=$(cat); printf '%s|%s|%s|%s' "$PWD" "$1" "$2" "$x"`, "sh", "it's $HOME; `id`", "a b"}
		h.ctlW.Write([]byte(shellQuote(words) + "\n"))
		h.stdinW.Write([]byte("in"))
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		h.ctlW.Close()
		want := h.dir + "|it's $HOME; `id`|a b|in"
		if code := h.wait(t); code != 0 || h.out.String() != want || h.exists("placeholder-ran") {
			t.Errorf("exit %d, output %q, want %q", code, h.out.String(), want)
		}
		// A working directory that does not exist: 126, nothing ran.
		h = start("cmd", `true`)
		h.ctlW.Write([]byte(shellQuote([]string{"/nonexistent", "/bin/sh", "-c", `echo > "$DIR/ran"`}) + "\n"))
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		h.ctlW.Close()
		if code := h.wait(t); code != 126 || h.exists("ran") {
			t.Errorf("missing cwd: exit %d", code)
		}
	})
}

// After the entry point's exit the holder kills what it left running
// (a background writer that would otherwise touch the host's files after
// the answer), reports the status, and stays until the control pipe ends
// (the launcher's Close): the container's teardown comes after the answer.
func TestHolderLingersUntilClose(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("launch", `cat >/dev/null; (sleep 0.3; echo late > "$DIR/late") & echo out; exit 3`)
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		line := make([]byte, 3)
		if _, err := io.ReadFull(h.ready, line); err != nil || string(line) != "x3\n" {
			t.Fatalf("report %q, %v; want x3", line, err)
		}
		time.Sleep(600 * time.Millisecond)
		if h.exists("late") {
			t.Error("the entry point's background process ran on after the report")
		}
		var ws syscall.WaitStatus
		if pid, _ := syscall.Wait4(h.cmd.Process.Pid, &ws, syscall.WNOHANG, nil); pid != 0 {
			t.Fatalf("the holder exited (%v) before the control pipe ended", ws)
		}
		h.ctlW.Close()
		if code := h.wait(t); code != 3 {
			t.Errorf("holder exit %d after the control pipe's end, want the entry point's 3", code)
		}
	})
}

// While the entry point runs, the holder (the pid namespace's init)
// reaps the processes the entry point orphaned as they end: a skill that
// daemonises short-lived processes does not fill the sandbox's task
// limit with zombies. Checked from the host: the holder's children.
func TestHolderReapsOrphans(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("launch", `cat >/dev/null; for i in 1 2 3 4 5; do (sh -c 'exit 0' &); done; sleep 1; echo done`)
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		time.Sleep(500 * time.Millisecond)
		pid := h.cmd.Process.Pid
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			t.Skipf("skipped: /proc/PID/task/PID/children is not readable here: %v", err)
		}
		zombies, alive := 0, 0
		for _, k := range strings.Fields(string(kids)) {
			st, err := os.ReadFile("/proc/" + k + "/stat")
			if err != nil {
				continue
			}
			if f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				zombies++
			} else {
				alive++
			}
		}
		if alive != 1 || zombies != 0 {
			t.Errorf("the holder's children while the entry point sleeps: %d alive (want the entry point), %d zombies (want 0)", alive, zombies)
		}
		h.ctlW.Close()
		if code := h.wait(t); code != 0 || h.out.String() != "done\n" {
			t.Errorf("exit %d, output %q", code, h.out.String())
		}
	})
}

// The entry point starts with SIGPIPE's default action (the holder
// ignores it for itself): a skill writing to a closed pipe dies of it as
// it would anywhere else.
func TestHolderEntrySignals(t *testing.T) {
	eachHolder(t, func(t *testing.T, start func(mode, script string) *holderRun) {
		h := start("launch", `cat >/dev/null; cat /proc/self/status`)
		h.stdinW.Close()
		h.ctlW.Write([]byte("e\n"))
		h.ctlW.Close()
		if code := h.wait(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		var ign uint64
		for _, l := range strings.Split(h.out.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
				ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			}
		}
		if ign&(1<<(uint(syscall.SIGPIPE)-1)) != 0 {
			t.Errorf("the entry point ignores SIGPIPE (SigIgn %#x)", ign)
		}
	})
}

// The built-in holder reaps its children itself even when it was
// started with SIGCHLD ignored (inherited across exec: the kernel would
// reap them and the entry point's status be lost). The shell holder
// cannot: a shell may not reset a signal ignored on entry.
func TestHolderSIGCHLDIgnoredOnEntry(t *testing.T) {
	if !holder.Linked() {
		t.Skip("skipped: this binary has no built-in holder (built without cgo, or not for glibc)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("skipped: no python3 to exec the holder with SIGCHLD ignored (a shell cannot: dash keeps its own handler)")
	}
	k := holderKind{"builtin-sigchld-ignored", func(mode string, entry ...string) []string {
		return append([]string{py, "-c", "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"},
			holder.Args(exe, mode, entry...)...)
	}}
	h := startHolder(t, k, "launch", `cat >/dev/null; exit 7`)
	h.stdinW.Close()
	h.ctlW.Write([]byte("e\n"))
	h.ctlW.Close()
	if code := h.wait(t); code != 7 {
		t.Errorf("exit %d, want the entry point's 7", code)
	}
	if rest, _ := io.ReadAll(h.ready); string(rest) != "x7\n" {
		t.Errorf("the ready pipe said %q after r, want x7", rest)
	}
}
