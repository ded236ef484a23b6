package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"

	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/spec"
)

// fakeRT is a test double of runtime.Runtime: Run calls behave, which
// plays the container.
type fakeRT struct {
	mu      sync.Mutex
	behave  func(ctx context.Context, opts runtime.RunOpts) (int, error)
	runs    int
	deletes []string
	ids     []string
	specs   []*specs.Spec
	stdin   []string
	bundles []string
}

func (f *fakeRT) Run(ctx context.Context, id string, opts runtime.RunOpts) (int, error) {
	f.mu.Lock()
	f.runs++
	f.ids = append(f.ids, id)
	f.specs = append(f.specs, opts.Spec)
	f.bundles = append(f.bundles, opts.Bundle)
	f.mu.Unlock()
	// The runtime gets the spec in memory and needs rootfs; config.json
	// is written once the container's program runs.
	if _, err := os.Stat(filepath.Join(opts.Bundle, "rootfs")); err != nil {
		return -1, err
	}
	if opts.Spec == nil {
		return -1, errors.New("no spec handed to the runtime")
	}
	if _, err := os.Stat(filepath.Join(opts.Bundle, "config.json")); err == nil {
		return -1, errors.New("config.json written before the container's program started")
	}
	if opts.Started == nil {
		return -1, errors.New("no Started callback handed to the runtime")
	}
	opts.Started(4242)
	if !eventually(func() bool { _, err := os.Stat(filepath.Join(opts.Bundle, "config.json")); return err == nil }) {
		return -1, errors.New("config.json never appeared in the bundle during the run")
	}
	in, _ := io.ReadAll(opts.Stdio.Stdin)
	f.mu.Lock()
	f.stdin = append(f.stdin, string(in))
	f.mu.Unlock()
	return f.behave(ctx, opts)
}

func (f *fakeRT) Delete(_ context.Context, id string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deletes = append(f.deletes, id)
	return runtime.ErrNotExist
}

var errNS = errors.New("not used by the skill runner")

// eventually polls cond for up to two seconds.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func (f *fakeRT) Create(context.Context, string, runtime.CreateOpts) error { return errNS }
func (f *fakeRT) Start(context.Context, string) error                      { return errNS }
func (f *fakeRT) State(context.Context, string) (*runtime.State, error)    { return nil, errNS }
func (f *fakeRT) List(context.Context) ([]runtime.State, []error, error)   { return nil, nil, errNS }
func (f *fakeRT) Kill(context.Context, string, syscall.Signal, bool) error { return errNS }
func (f *fakeRT) Exec(context.Context, string, runtime.ExecOpts) (int, error) {
	return 0, errNS
}
func (f *fakeRT) Ps(context.Context, string) ([]int, error) { return nil, errNS }
func (f *fakeRT) Pause(context.Context, string) error       { return errNS }
func (f *fakeRT) Resume(context.Context, string) error      { return errNS }
func (f *fakeRT) Events(context.Context, string, runtime.EventsOpts, func(runtime.Event) error) error {
	return errNS
}
func (f *fakeRT) Update(context.Context, string, *specs.LinuxResources) error { return errNS }
func (f *fakeRT) Features() (*features.Features, error)                       { return nil, errNS }

var _ runtime.Runtime = (*fakeRT)(nil)

func load(t *testing.T, name string) *spec.Skill {
	t.Helper()
	s, err := spec.Load(filepath.Join("..", "examples", "skills", name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exited plays a container that writes out/errOut and exits with code,
// filling ExitInfo like the Linux back end.
func exited(out, errOut string, code int, cgroups bool) func(context.Context, runtime.RunOpts) (int, error) {
	return func(_ context.Context, o runtime.RunOpts) (int, error) {
		io.WriteString(o.Stdio.Stdout, out)
		io.WriteString(o.Stdio.Stderr, errOut)
		*o.Exit = runtime.ExitInfo{Status: code, Wall: 12 * time.Millisecond, CPU: 5 * time.Millisecond, UserCPU: 3 * time.Millisecond, SysCPU: 2 * time.Millisecond, MaxRSS: 7 << 20, Cgroups: cgroups}
		return code, nil
	}
}

// blocked plays a container that runs until the runtime kills it when
// ctx ends, as Run's contract says.
func blocked(write func(o runtime.RunOpts)) func(context.Context, runtime.RunOpts) (int, error) {
	return func(ctx context.Context, o runtime.RunOpts) (int, error) {
		if write != nil {
			write(o)
		}
		<-ctx.Done()
		*o.Exit = runtime.ExitInfo{Status: 137, Signal: syscall.SIGKILL, Cgroups: true}
		return 137, ctx.Err()
	}
}

func TestRunOK(t *testing.T) {
	t.Setenv("SKILLRUN_CANARY", "leak-me-not")
	rt := &fakeRT{behave: exited(`{"result": 4}`+"\n", "note\n", 0, true)}
	res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "2+2"}`), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.ExitCode != 0 || res.StoppedReason != "" || res.ProcessExitCode() != ExitOK {
		t.Errorf("result = %+v", res)
	}
	if raw, ok := res.Output.(json.RawMessage); !ok || string(raw) != `{"result": 4}` {
		t.Errorf("output = %#v", res.Output)
	}
	if res.Stderr != "note\n" || res.Usage != (Usage{WallMS: 12, CPUMS: 5, PeakMemoryBytes: 7 << 20}) {
		t.Errorf("stderr/usage = %q %+v", res.Stderr, res.Usage)
	}
	if l := res.Limits; l == nil || !l.Cgroups || *l.MemoryBytes != 64<<20 || *l.Pids != 16 || l.TimeoutMS != 5000 || l.Network != "none" || len(l.NotEnforced) != 0 {
		t.Errorf("limits = %+v", res.Limits)
	}
	if rt.stdin[0] != `{"expression": "2+2"}` {
		t.Errorf("stdin = %q", rt.stdin[0])
	}
	if !strings.HasPrefix(rt.ids[0], "skill-calculator-") || runtime.ValidateID(rt.ids[0]) != nil {
		t.Errorf("id = %q", rt.ids[0])
	}
	for _, e := range rt.specs[0].Process.Env {
		if strings.Contains(e, "leak-me-not") {
			t.Errorf("caller's environment leaked: %s", e)
		}
	}
	if _, err := os.Stat(rt.bundles[0]); !os.IsNotExist(err) {
		t.Errorf("bundle %s left behind: %v", rt.bundles[0], err)
	}
}

func TestRunNotJSONAndFailure(t *testing.T) {
	rt := &fakeRT{behave: exited("plain text", strings.Repeat("e", StderrTail+100)+"END", 3, false)}
	res, err := runJSON(context.Background(), rt, load(t, "text-stats"), []byte(`{"text": "x"}`), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || res.ExitCode != 3 || res.ProcessExitCode() != ExitSkillFailed || res.Output != "plain text" {
		t.Errorf("result = %+v", res)
	}
	if len(res.Stderr) != StderrTail || !strings.HasSuffix(res.Stderr, "END") {
		t.Errorf("stderr tail has %d bytes", len(res.Stderr))
	}
	if l := res.Limits; l.Cgroups || l.MemoryBytes != nil || strings.Join(l.NotEnforced, ",") != "memory,cpus,pids" {
		t.Errorf("limits = %+v", l)
	}
}

func TestRunTimeout(t *testing.T) {
	rt := &fakeRT{behave: blocked(nil)}
	start := time.Now()
	res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{Grants: spec.Grants{Timeout: 50 * time.Millisecond}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedTimeout || res.ProcessExitCode() != ExitTimeout || res.OK {
		t.Errorf("result = %+v", res)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestRunOutputLimit(t *testing.T) {
	rt := &fakeRT{behave: blocked(func(o runtime.RunOpts) {
		o.Stdio.Stdout.Write(bytes.Repeat([]byte("x"), 3000))
	})}
	res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{Grants: spec.Grants{OutputLimit: 1000}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedOutputLimit || res.ProcessExitCode() != ExitOutputLimit || len(res.Output.(string)) != 1000 {
		t.Errorf("result = %+v", res)
	}
}

func TestRunOOMAndSignal(t *testing.T) {
	rt := &fakeRT{behave: func(_ context.Context, o runtime.RunOpts) (int, error) {
		*o.Exit = runtime.ExitInfo{Status: 137, Signal: syscall.SIGKILL, OOMKilled: true, Cgroups: true}
		return 137, nil
	}}
	res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedMemory || res.ProcessExitCode() != ExitOOM {
		t.Errorf("result = %+v", res)
	}
	rt.behave = func(_ context.Context, o runtime.RunOpts) (int, error) {
		*o.Exit = runtime.ExitInfo{Status: 143, Signal: syscall.SIGTERM}
		return 143, nil
	}
	res, err = runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedSignal || res.ProcessExitCode() != ExitSkillFailed || res.ExitCode != 143 {
		t.Errorf("result = %+v", res)
	}
}

func TestRunPolicyAndBadInput(t *testing.T) {
	rt := &fakeRT{behave: exited("{}", "", 0, true)}
	tmp := t.TempDir()
	res, err := runJSON(context.Background(), rt, load(t, "fetch-url"), []byte(`{"url": "https://example.com"}`), Options{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedPolicy || res.ProcessExitCode() != ExitPolicy || !strings.Contains(res.Error, "example.com:443") || res.Limits != nil {
		t.Errorf("result = %+v", res)
	}
	res, err = runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{Grants: spec.Grants{Network: "example.com"}, TempDir: tmp})
	if err != nil || res.StoppedReason != StoppedPolicy {
		t.Errorf("host list: %+v %v", res, err)
	}
	for _, in := range []string{`{"expr": "1"}`, `[]`, `{`} {
		if _, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(in), Options{TempDir: tmp}); !IsInputError(err) {
			t.Errorf("input %s: err = %v, want an InputError", in, err)
		}
	}
	if _, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{Grants: spec.Grants{Memory: 1}, TempDir: tmp}); !IsInputError(err) {
		t.Errorf("memory 1 byte: err = %v", err)
	}
	if rt.runs != 0 {
		t.Errorf("runtime called %d times for refused runs", rt.runs)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestRunRuntimeError(t *testing.T) {
	rt := &fakeRT{behave: func(context.Context, runtime.RunOpts) (int, error) { return -1, errors.New("boom") }}
	tmp := t.TempDir()
	_, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: tmp})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	if len(rt.deletes) != 1 || rt.deletes[0] != rt.ids[0] {
		t.Errorf("deletes = %v, want the container deleted", rt.deletes)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestRunInterrupted(t *testing.T) {
	rt := &fakeRT{behave: blocked(nil)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	res, err := runJSON(ctx, rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedReason != StoppedSignal || !strings.Contains(res.Error, "interrupted") {
		t.Errorf("result = %+v", res)
	}
}

func TestArgvReachesProcess(t *testing.T) {
	rt := &fakeRT{behave: exited("{}", "", 0, true)}
	if _, err := runJSON(context.Background(), rt, load(t, "csv-summary"), []byte(`{"data": "a\n1", "top": 2}`), Options{TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	args := strings.Join(rt.specs[0].Process.Args, " ")
	if !strings.HasSuffix(args, "/skill/scripts/main.py --data=a\n1 --top=2") {
		t.Errorf("args = %q", args)
	}
}

func TestBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Bundle(nil, dir, load(t, "calculator"), nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Bundle(nil, dir, load(t, "calculator"), nil, Options{}); !IsInputError(err) {
		t.Errorf("bundle into a non-empty folder: %v", err)
	}
	if _, err := Bundle(nil, filepath.Join(t.TempDir(), "c"), load(t, "fetch-url"), nil, Options{}); !errors.Is(err, spec.ErrPolicy) {
		t.Errorf("policy: %v", err)
	}
}

func TestCapWriter(t *testing.T) {
	fired := 0
	w := &capWriter{limit: 5, over: func() { fired++ }}
	w.Write([]byte("abc"))
	w.Write([]byte("de"))
	if fired != 0 {
		t.Fatal("fired at the limit")
	}
	if n, err := w.Write([]byte("fgh")); n != 3 || err != nil {
		t.Fatalf("write past the limit = %d, %v", n, err)
	}
	w.Write([]byte("i"))
	if fired != 1 || string(w.Bytes()) != "abcde" {
		t.Errorf("fired %d, kept %q", fired, w.Bytes())
	}
}

// noCgroupRT is a back end that reports (runtime.CgroupProber) that it
// will not apply cgroup limits.
type noCgroupRT struct{ *fakeRT }

func (noCgroupRT) CgroupLimits() bool { return false }

// specRlimits are the soft rlimits of the spec's process: process.rlimits
// and those a prlimit(1) wrapper in front of the entry point sets.
func specRlimits(sp *specs.Spec) map[string]uint64 {
	m := map[string]uint64{}
	for _, r := range sp.Process.Rlimits {
		m[r.Type] = r.Soft
	}
	if a := sp.Process.Args; len(a) > 0 && a[0] == prlimitPath {
		for _, opt := range a[1:] {
			if opt == "--" {
				break
			}
			name, val, _ := strings.Cut(strings.TrimPrefix(opt, "--"), "=")
			soft, _, _ := strings.Cut(val, ":")
			n, _ := strconv.ParseUint(soft, 10, 64)
			m["RLIMIT_"+strings.ToUpper(name)] = n
		}
	}
	return m
}

func TestRunRlimitFallback(t *testing.T) {
	cases := []struct {
		name, stderr string
		code         int
		info         runtime.ExitInfo
		reason       string
		exit         int
	}{
		{"ok", "", 0, runtime.ExitInfo{}, "", ExitOK},
		{"memory", "Traceback\nMemoryError\n", 1, runtime.ExitInfo{Status: 1}, StoppedMemory, ExitOOM},
		{"mmap ENOMEM", "OSError: [Errno 12] Cannot allocate memory\n", 1, runtime.ExitInfo{Status: 1}, StoppedMemory, ExitOOM},
		{"pids", "forked 15: [Errno 11] Resource temporarily unavailable\n", 1, runtime.ExitInfo{Status: 1}, StoppedPids, ExitSkillFailed},
		{"sigxcpu", "", 152, runtime.ExitInfo{Status: 152, Signal: syscall.SIGXCPU}, StoppedCPUTime, ExitTimeout},
		{"sigkill at the hard limit", "", 137, runtime.ExitInfo{Status: 137, Signal: syscall.SIGKILL, CPU: 40 * time.Second}, StoppedCPUTime, ExitTimeout},
		{"sigkill from elsewhere", "", 137, runtime.ExitInfo{Status: 137, Signal: syscall.SIGKILL, CPU: time.Second}, StoppedSignal, ExitSkillFailed},
		{"plain failure", "boom\n", 2, runtime.ExitInfo{Status: 2}, "", ExitSkillFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeRT{behave: func(_ context.Context, o runtime.RunOpts) (int, error) {
				io.WriteString(o.Stdio.Stderr, c.stderr)
				*o.Exit = c.info
				return c.code, nil
			}}
			res, err := runJSON(context.Background(), noCgroupRT{f}, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: t.TempDir(), Grants: spec.Grants{Memory: 64 << 20, Pids: 16}})
			if err != nil {
				t.Fatal(err)
			}
			if res.StoppedReason != c.reason || res.ProcessExitCode() != c.exit {
				t.Errorf("stopped %q exit %d, want %q %d (%+v)", res.StoppedReason, res.ProcessExitCode(), c.reason, c.exit, res)
			}
			r := specRlimits(f.specs[0])
			if r["RLIMIT_AS"] != 64<<20 || r["RLIMIT_DATA"] != 64<<20 || r["RLIMIT_CPU"] == 0 {
				t.Errorf("rlimits = %v", r)
			}
			l := res.Limits
			if l.Cgroups || l.MemoryBytes == nil || *l.MemoryBytes != 64<<20 || l.CPUs != nil || l.Enforcement == nil {
				t.Fatalf("limits = %+v", l)
			}
			e := l.Enforcement
			if e.Memory.EnforcedBy != "rlimit_as" || e.Memory.Scope != ScopeProcess || e.CPUs.EnforcedBy != "none" || e.CPUTime == nil || e.CPUTime.EnforcedBy != "rlimit_cpu" {
				t.Errorf("enforcement = %+v", e)
			}
			if nprocPerUserNS() {
				if e.Pids.EnforcedBy != "rlimit_nproc" || l.Pids == nil || strings.Join(l.NotEnforced, ",") != "cpus" || r["RLIMIT_NPROC"] != 16 {
					t.Errorf("pids: %+v, not_enforced %v, rlimits %v", e.Pids, l.NotEnforced, r)
				}
			} else if e.Pids.EnforcedBy != "none" || strings.Join(l.NotEnforced, ",") != "pids,cpus" {
				t.Errorf("pids on a kernel without per-userns RLIMIT_NPROC: %+v, not_enforced %v", e.Pids, l.NotEnforced)
			}
		})
	}
}

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{"5.14.0": true, "5.13.19-2": false, "6.1.0-18-amd64": true, "4.19.0": false, "10.0": true, "5": false, "": false} {
		if got := kernelAtLeast(rel, 5, 14); got != want {
			t.Errorf("kernelAtLeast(%q) = %v", rel, got)
		}
	}
}

// runJSON is Run of the input document raw (checked by NewInput first, as
// every caller does).
func runJSON(ctx context.Context, rt runtime.Runtime, sk *spec.Skill, raw []byte, opts Options) (*Result, error) {
	in, err := NewInput(sk, raw)
	if err != nil {
		return nil, err
	}
	return Run(ctx, rt, sk, in, opts)
}

// TestRunPidsLimitHit: the pids cgroup's refusal is named: a run that
// failed of it is stopped by the task limit, one that went on is warned.
func TestRunPidsLimitHit(t *testing.T) {
	for _, c := range []struct {
		status int
		want   string
	}{{2, StoppedPids}, {0, ""}} {
		rt := &fakeRT{behave: func(_ context.Context, o runtime.RunOpts) (int, error) {
			*o.Exit = runtime.ExitInfo{Status: c.status, Cgroups: true, PidsLimitHit: true}
			return c.status, nil
		}}
		res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`), Options{TempDir: t.TempDir(), Grants: spec.Grants{Pids: 20}})
		if err != nil {
			t.Fatal(err)
		}
		if res.StoppedReason != c.want {
			t.Errorf("status %d: stopped %q, want %q", c.status, res.StoppedReason, c.want)
		}
		warned := strings.Contains(strings.Join(res.Warnings, "\n"), "the task limit (20) was reached")
		if (c.want == "") != warned || (c.want != "" && !strings.Contains(res.Error, "task limit 20 reached")) {
			t.Errorf("status %d: error %q, warnings %q", c.status, res.Error, res.Warnings)
		}
	}
}
