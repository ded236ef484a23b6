//go:build integration

package skills_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

// hostProc is a process as the host sees it: pid and start time.
type hostProc struct {
	pid   int
	start string
}

func hostProcOf(pid int) (hostProc, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return hostProc{}, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+2:])
	if len(f) < 20 {
		return hostProc{}, false
	}
	return hostProc{pid, f[19]}, true
}

// alive: the same process (pid and start time), neither zombie nor dead.
func (p hostProc) alive() bool {
	q, ok := hostProcOf(p.pid)
	return ok && q.start == p.start && hostcheck.Alive(p.pid)
}

// nsMates lists the live processes in the pid namespace of pid.
func nsMates(pid int) []hostProc {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return nil
	}
	var out []hostProc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p)); l == ns {
			if hp, ok := hostProcOf(p); ok && hostcheck.Alive(p) {
				out = append(out, hp)
			}
		}
	}
	return out
}

// TestDepsPrepareKilled: skill prepare SIGKILLed while its build sandbox
// waits on the package index (a request the index holds): every process
// of the build sandbox is gone within a second (pid and start time, from
// the host), nothing of it is left (TMPDIR, state, mounts, cgroups), and
// the next prepare builds the environment.
func TestDepsPrepareKilled(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ix := newPyIndex(t)
		ix.addWheel(t, "skilltestpkg", "1.0.0", "def answer():\n    return 42\n")
		var stall atomic.Bool
		stall.Store(true)
		asked := make(chan struct{}, 16)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		fs := http.FileServer(http.Dir(ix.dir))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stall.Load() {
				select {
				case asked <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-r.Context().Done():
				}
				return
			}
			fs.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		url := srv.URL + "/simple/"
		cache := envCache(t, m)
		sk := depsSkill(t, "killedprep", map[string]string{"requirements.txt": "skilltestpkg==1.0.0\n", "main.py": pyMain})
		args := []string{"skill", "prepare", "--env-cache", cache, "--pip-index-url", url, sk}

		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := m.commandContext(ctx, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		select {
		case <-asked:
		case <-time.After(60 * time.Second):
			t.Fatal("the build never asked the index")
		}
		// The build sandbox: pip, whose command line names the index (its
		// synthetic name, with the index's port), and every process of
		// its pid namespace.
		port := url[strings.LastIndexByte(srv.URL, ':'):]
		var procs []hostProc
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "--index-url") && strings.Contains(string(b), port) && hostcheck.InOtherPidNS(pid) {
				procs = nsMates(pid)
				break
			}
		}
		if len(procs) == 0 {
			t.Fatal("control: no process of the build sandbox (naming the index, in a pid namespace of its own) found")
		}
		var ids []string
		if states, _ := os.ReadDir(filepath.Join(m.tmp, "state")); len(states) > 0 {
			for _, s := range states {
				if s.Name() != "@locks" {
					ids = append(ids, s.Name())
				}
			}
		}
		t.Cleanup(func() {
			for _, p := range procs {
				if p.alive() && hostcheck.InOtherPidNS(p.pid) {
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
				}
			}
			for _, id := range ids {
				for _, d := range hostcheck.CgroupDirsNamed(id) {
					hostcheck.RemoveCgroup(d)
				}
			}
		})
		runner := cmd.Process.Pid
		if m.user != nil { // runuser's child
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", runner, runner))
			f := strings.Fields(string(b))
			if len(f) == 0 {
				t.Fatal("control: no skillrun under runuser")
			}
			runner, _ = strconv.Atoi(f[0])
		}
		killed := time.Now()
		if err := syscall.Kill(runner, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for {
			alive := 0
			for _, p := range procs {
				if p.alive() {
					alive++
				}
			}
			if alive == 0 {
				t.Logf("the build sandbox's %d processes gone %s after skill prepare's SIGKILL", len(procs), time.Since(killed).Round(time.Millisecond))
				break
			}
			if time.Since(killed) > time.Second {
				t.Fatalf("1 s after skill prepare's SIGKILL, %d of its build sandbox's %d processes still live", alive, len(procs))
			}
			time.Sleep(5 * time.Millisecond)
		}
		_ = cmd.Wait()
		time.Sleep(200 * time.Millisecond) // the guard removes the state and bundle after the processes
		m.assertClean(t)
		m.assertNoHostLeftovers(t, ids)

		stall.Store(false)
		res := m.run(t, "", args...)
		if res.code != 0 || !strings.Contains(res.stdout, `"status":"built"`) {
			t.Fatalf("skill prepare after the killed one\n%s", res)
		}
		m.assertClean(t)
	})
}
