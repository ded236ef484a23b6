//go:build integration

package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

func (m *mode) eager() string { return filepath.Join(m.data, "tests", "skills", "testdata", "eager") }

// containers returns the containers of the state root whose ID starts
// with "skill-NAME-" ("skill-" for name "") and whose init process is
// alive, by ID.
func (m *mode) containers(name string) map[string]int {
	stateDir := filepath.Join(m.tmp, "state")
	prefix := "skill-"
	if name != "" {
		prefix += name + "-"
	}
	out := map[string]int{}
	ents, _ := os.ReadDir(stateDir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(stateDir, e.Name(), "state.json"))
		var st struct {
			Pid int `json:"init_process_pid"`
		}
		if err == nil && json.Unmarshal(b, &st) == nil && st.Pid > 0 && hostcheck.Alive(st.Pid) {
			out[e.Name()] = st.Pid
		}
	}
	return out
}

// waitContainers waits until n containers of skill name run.
func (m *mode) waitContainers(t *testing.T, name string, n int) map[string]int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := m.containers(name)
		if len(c) == n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d running %s sandboxes, have %d: %v", n, name, len(c), c)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPooled waits until n sandboxes of skill name wait in the pool:
// running, their entry point (the input holder's child) blocked reading
// its stdin pipe. It returns them by ID and every process of theirs.
func (m *mode) waitPooled(t *testing.T, name string, n int) (map[string]int, []int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pooled := m.containers(name)
		var pids []int
		for _, pid := range pooled {
			pids = append(pids, pid)
			b, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "task", itoa(pid), "children"))
			for _, f := range strings.Fields(string(b)) {
				var child int
				_ = json.Unmarshal([]byte(f), &child)
				if wchan, _ := os.ReadFile(filepath.Join("/proc", itoa(child), "wchan")); strings.Contains(string(wchan), "pipe") {
					pids = append(pids, child)
				}
			}
		}
		if len(pooled) == n && len(pids) == 2*n {
			// The holder told the server it was ready before its child
			// got this far; give the server a moment to file it.
			time.Sleep(50 * time.Millisecond)
			return pooled, pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pooled %s sandboxes (holder and entry point blocked on stdin), have %v, pids %v", n, name, pooled, pids)
		}
	}
}

// idRecorder samples the state root while a test runs and remembers
// every container ID it saw (for the host-side leftover checks).
type idRecorder struct {
	mu   sync.Mutex
	ids  map[string]bool
	stop chan struct{}
	done chan struct{}
}

func (m *mode) recordIDs() *idRecorder {
	r := &idRecorder{ids: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			ents, _ := os.ReadDir(filepath.Join(m.tmp, "state"))
			r.mu.Lock()
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "skill-") {
					r.ids[e.Name()] = true
				}
			}
			r.mu.Unlock()
			select {
			case <-r.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return r
}

func (r *idRecorder) finish() []string {
	close(r.stop)
	<-r.done
	var out []string
	for id := range r.ids {
		out = append(out, id)
	}
	return out
}

// assertNoHostLeftovers checks from the host that none of the containers
// ids has a cgroup left, and that no mount of the host's mount table
// refers to the mode's TMPDIR (bundles, rootfs).
func (m *mode) assertNoHostLeftovers(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		if dirs := hostcheck.CgroupDirsNamed(id); len(dirs) != 0 {
			t.Errorf("cgroups of %s left: %v", id, dirs)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, m.tmp) {
			t.Errorf("mount left behind: %s", l)
		}
	}
}

// TestMCPPoolWarmCalls: with --pool 2 the server keeps two calculator
// sandboxes running while idle; a call consumes one of them (that
// container is gone soon after the call, which is answered before its
// teardown; the other still waits: a sandbox is never reused) and the
// pool refills to two. A flood of 20 calls at once
// (more than the pool) all succeed (cold beyond the pool), and after the
// session no container, cgroup, mount or bundle is left.
func TestMCPPoolWarmCalls(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		rec := m.recordIDs()
		cs := m.mcpServe(t, "--pool", "2", "--watch", "0")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before, _ := m.waitPooled(t, "calculator", 2)
		c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": "6*7"})
		if c.r.IsError || !c.res.OK || string(mustJSON(c.res.Output)) != `{"expression":"6*7","result":42}` {
			t.Fatalf("warm call: %s", c.text())
		}
		// The answer comes before the used sandbox's teardown (the
		// holder reports the entry point's status): it goes soon after.
		consumed, after := m.consumed("calculator", before)
		if consumed != 1 {
			t.Errorf("the call consumed %d of the pool's sandboxes (before %v, after %v): want exactly 1 (warm, not reused)", consumed, before, after)
		}
		m.waitContainers(t, "calculator", 2) // refilled

		// Input errors and failures through a warm sandbox.
		if c := callTool(t, ctx, cs, "calculator", map[string]any{"expression": "1/0"}); !c.r.IsError || c.res.OK {
			t.Errorf("1/0 is not a tool error: %s", c.text())
		}

		var wg sync.WaitGroup
		errs := make(chan string, 20)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "calculator", Arguments: map[string]any{"expression": "1+" + itoa(i)}})
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := json.Marshal(r.StructuredContent)
				var res skillResult
				_ = json.Unmarshal(b, &res)
				if r.IsError || string(mustJSON(res.Output)) != `{"expression":"1+`+itoa(i)+`","result":`+itoa(1+i)+`}` {
					errs <- string(b)
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("flood call: %s", e)
		}
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		// The server exits once its stdin closes: wait for its pools to go.
		deadline := time.Now().Add(30 * time.Second)
		for len(m.containers("")) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("containers still running after the session: %v", m.containers(""))
			}
			time.Sleep(20 * time.Millisecond)
		}
		ids := rec.finish()
		if len(ids) < 20 {
			t.Errorf("saw only %d containers: the recorder missed the flood", len(ids))
		}
		m.assertNoHostLeftovers(t, ids)
	})
}

// TestMCPPoolWarmInputSizes: a warm sandbox gets its whole input, one a
// pipe holds at once (written before the call waits) and one several
// times larger than a pipe (written while the entry point reads it),
// and each call consumes the pooled sandbox (it ran warm).
func TestMCPPoolWarmInputSizes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		cs := m.mcpServe(t, "--pool", "1", "--watch", "0")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, n := range []int{3000, 300000} {
			before, _ := m.waitPooled(t, "probe", 1)
			c := callTool(t, ctx, cs, "probe", map[string]any{"mode": "size", "pad": strings.Repeat("x", n)})
			if c.r.IsError || !c.res.OK || string(mustJSON(c.res.Output)) != `{"intact":true,"pad":`+itoa(n)+`}` {
				t.Fatalf("warm call with a %d-byte pad: %s", n, c.text())
			}
			if gone, after := m.consumed("probe", before); gone != 1 {
				t.Fatalf("the %d-byte call did not consume the pooled sandbox (before %v, after %v): it did not run warm", n, before, after)
			}
		}
	})
}

// TestMCPPoolWarmEnds: a warm sandbox's entry point that does not exit
// normally is answered as such, at its end (not held until the
// wall-clock limit, not as a timeout): killed by a signal of its own
// (stopped_reason "signal", exit code 128+9) and by the memory limit
// (stopped_reason "memory": the OOM killer's SIGKILL, or a failed
// allocation under RLIMIT_AS without cgroups), each through the pooled
// sandbox.
func TestMCPPoolWarmEnds(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		cs := m.mcpServe(t, "--pool", "1", "--watch", "0", "--memory", "64Mi")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, tc := range []struct{ mode, stopped string }{{"kill", "signal"}, {"hog", "memory"}} {
			before, _ := m.waitPooled(t, "probe", 1)
			c := callTool(t, ctx, cs, "probe", map[string]any{"mode": tc.mode})
			// The OOM killer's SIGKILL when a cgroup enforces the memory
			// limit; without one (rootless, no delegation) the
			// allocation fails under RLIMIT_AS and Python exits 1.
			code := 137
			if tc.mode == "hog" && (c.res.Limits == nil || c.res.Limits.Enforcement["memory"].EnforcedBy != "cgroup") {
				code = 1
			}
			if !c.r.IsError || c.res.OK || c.res.StoppedReason != tc.stopped || c.res.ExitCode != code {
				t.Errorf("warm call, mode %s: %s; want stopped_reason %s, exit code %d", tc.mode, c.text(), tc.stopped, code)
			}
			if gone, after := m.consumed("probe", before); gone != len(before) {
				t.Errorf("mode %s: the call did not consume the pooled sandbox (before %v, after %v): it did not run warm", tc.mode, before, after)
			}
		}
	})
}

// consumed waits (at most 5 s) until a call has taken one or more of the
// pooled sandboxes before (by ID) of skill name, and says how many of
// them are gone, and what runs now.
func (m *mode) consumed(name string, before map[string]int) (int, map[string]int) {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after, gone := m.containers(name), 0
		for id := range before {
			if _, ok := after[id]; !ok {
				gone++
			}
		}
		if gone > 0 || time.Now().After(deadline) {
			return gone, after
		}
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestMCPPoolKilledServer is the killed-server hazard of warm sandboxes:
// their entry points wait on stdin, and a dead server's end of the pipe
// closes. The eager skill writes a file into the workspace whenever its
// code runs, whatever its input. A positive control call shows it does;
// then, with a full pool of 2 (holders and entry points seen blocked
// from the host), the server is SIGKILLed: the pooled processes die, no
// file ever appears (no pooled entry point ran on an empty input), and
// the server's lifetime guard removes the rest (state, cgroups, bundles)
// before any restart.
func TestMCPPoolKilledServer(t *testing.T) {
	m := rootOnly(t, " (checks the orphaned sandboxes' processes from the host)")
	ws := ownedDir(t, m)
	start := func(pool string) (*exec.Cmd, *mcp.ClientSession) {
		cmd := exec.Command(binary, "--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--skills", m.eager(),
			"--workspace", ws, "--pool", pool, "--watch", "0")
		cmd.Env = append(os.Environ(), "TMPDIR="+m.tmp)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cmd, cs
	}
	files := func() []string {
		ents, _ := os.ReadDir(ws)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	cmd, cs := start("2")
	m.waitPooled(t, "eager", 2)
	// Positive control: a call runs the code, which writes its file.
	c := callTool(t, context.Background(), cs, "eager", map[string]any{"x": 1})
	if c.r.IsError || len(files()) != 1 {
		t.Fatalf("control call: files %v, result %s", files(), c.text())
	}
	os.Remove(filepath.Join(ws, files()[0]))
	// Every process of the pooled sandboxes (holder and entry point).
	pooled, pids := m.waitPooled(t, "eager", 2)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	cs.Close()
	t.Cleanup(func() {
		for id, pid := range pooled {
			if hostcheck.Alive(pid) && hostcheck.InOtherPidNS(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			for _, d := range hostcheck.CgroupDirsNamed(id) {
				hostcheck.RemoveCgroup(d)
			}
		}
	})
	// The holders see their control pipe end: each kills its entry
	// point, then exits; the guard force-deletes the containers: gone
	// within a second.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, pid := range pids {
			if hostcheck.Alive(pid) {
				alive++
			}
		}
		if alive == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pooled processes still alive after their server died", alive)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if f := files(); len(f) != 0 {
		t.Fatalf("a pooled sandbox ran its code after its server died: %v", f)
	}
	// Their state, cgroups and bundles: removed by the guard, no restart
	// needed.
	var ids []string
	for id := range pooled {
		ids = append(ids, id)
	}
	m.assertNoHostLeftovers(t, ids)
	m.assertClean(t)
}

// TestMCPPoolSkillIgnoringInput: the documented limit of starting entry
// points ahead. A skill that never reads its input runs to its end when
// its warm sandbox launches (one workspace file); the first call returns
// that run's result, the server warns and switches the skill's pool to
// starting the entry point at the call: afterwards nothing runs without
// a call (one file per call).
func TestMCPPoolSkillIgnoringInput(t *testing.T) {
	m := rootOnly(t, "")
	ws := ownedDir(t, m)
	dir := filepath.Join(m.data, "tests", "skills", "testdata", "noinput")
	cmd := exec.Command(binary, "--root", filepath.Join(m.tmp, "state"), "mcp", "serve", "--skills", dir,
		"--workspace", ws, "--pool", "1", "--watch", "0")
	cmd.Env = append(os.Environ(), "TMPDIR="+m.tmp)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := func() int {
		ents, _ := os.ReadDir(ws)
		return len(ents)
	}
	for deadline := time.Now().Add(30 * time.Second); files() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the warm sandbox never ran the skill ahead: the test proves nothing")
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := files(); n != 1 {
		t.Fatalf("%d runs ahead of any call, want 1", n)
	}
	c := callTool(t, context.Background(), cs, "noinput", nil)
	if c.r.IsError || !c.res.OK || files() != 1 {
		t.Fatalf("first call: %d files, %s", files(), c.text())
	}
	time.Sleep(1500 * time.Millisecond) // the pool refills, in call mode
	if n := files(); n != 1 {
		t.Errorf("%d runs after the first call without a second one, want 1", n)
	}
	c = callTool(t, context.Background(), cs, "noinput", nil)
	if c.r.IsError || !c.res.OK || files() != 2 {
		t.Errorf("second call: %d files, %s", files(), c.text())
	}
	cs.Close()
	if !strings.Contains(stderr.String(), `does not wait for its input`) {
		t.Errorf("no warning about the skill on stderr:\n%s", stderr.String())
	}
	m.assertClean(t)
}
