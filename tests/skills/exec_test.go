//go:build integration

package skills_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

// execResult is the JSON envelope of skill exec / sandbox --format json.
type execResult struct {
	skillResult
	Command       []string `json:"command"`
	Cwd           string   `json:"cwd"`
	Warnings      []string `json:"warnings"`
	Notes         []string `json:"notes"`
	MissingModule string   `json:"missing_module"`
	Environment   *struct {
		Key   string   `json:"key"`
		Built bool     `json:"built"`
		Node  []string `json:"node"`
	} `json:"environment"`
}

// execJSON runs args (skill exec ... or sandbox ...) with --format json
// semantics, checks the exit code, decodes the one JSON result and checks
// that nothing was left behind.
func (m *mode) execJSON(t *testing.T, wantCode int, stdin string, args ...string) (execResult, result) {
	t.Helper()
	res := m.run(t, stdin, args...)
	if res.code != wantCode {
		t.Fatalf("want exit %d\n%s", wantCode, res)
	}
	var r execResult
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	if err := dec.Decode(&r); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, res)
	}
	m.assertClean(t)
	return r, res
}

// workspace is a folder the mode's sandbox can write, with files.
func workspace(t *testing.T, m *mode, files map[string]string) string {
	ws := ownedDir(t, m)
	uid, gid := m.uid, m.gid
	if m.user == nil && m.uid == 0 {
		uid, gid = 65534, 65534
	}
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
	}
	return ws
}

const salesCSV = "region,amount\nnorth,120\nsouth,80\neast,200\n"

// tabulateStandIn is the loopback index's stand-in for the tabulate
// package: the one call table-report makes, in GitHub's table format.
const tabulateStandIn = `def tabulate(rows, headers=(), tablefmt="github"):
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
`

// TestSkillExecScripts: an Agent-Skills-style skill (no entry point) used
// as an agent uses it: its sys.argv script run with arguments on a file of
// the workspace, from /workspace (the script found in the skill's folder)
// and from /skill; code written against its library from the workspace.
// The outputs are checked on the host.
func TestSkillExecScripts(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		sk := m.example("table-report")
		ws := workspace(t, m, map[string]string{"sales.csv": salesCSV})
		// scripts/requirements.txt names tabulate: the loopback index
		// serves a stand-in wheel of it (no PyPI here).
		ix := newPyIndex(t)
		ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
		deps := []string{"--env-cache", envCache(t, m), "--pip-index-url", ix.url()}
		exec := func(flags ...string) []string {
			return append(append([]string{"skill", "exec"}, deps...), flags...)
		}

		r, res := m.execJSON(t, 0, "", append(exec("--workspace", ws, sk, "--"), "python3", "scripts/csv_to_json.py", "sales.csv", "rows.json")...)
		if !r.OK || r.Cwd != "/workspace" || strings.Join(r.Command, " ") != "python3 /skill/scripts/csv_to_json.py sales.csv rows.json" || len(r.Notes) != 1 {
			t.Fatalf("want the script resolved in /skill and run from /workspace\n%s", res)
		}
		var rows []map[string]any
		data, err := os.ReadFile(filepath.Join(ws, "rows.json"))
		if err != nil || json.Unmarshal(data, &rows) != nil || len(rows) != 3 || rows[2]["amount"] != float64(200) {
			t.Fatalf("rows.json on the host: %v %s\n%s", err, data, res)
		}

		// From the skill's folder, on absolute workspace paths.
		if r.Environment == nil || !r.Environment.Built || ix.downloads("tabulate", "0.9.0") != 1 {
			t.Fatalf("want the environment of scripts/requirements.txt built on the first call\n%s", res)
		}
		r, res = m.execJSON(t, 0, "", append(exec("--workspace", ws, "--cwd", "/skill", sk, "--"), "python3", "scripts/csv_to_json.py", "/workspace/sales.csv", "/workspace/rows2.json")...)
		if r.Cwd != "/skill" || len(r.Notes) != 0 {
			t.Fatalf("want the command run as given from /skill\n%s", res)
		}
		if _, err := os.Stat(filepath.Join(ws, "rows2.json")); err != nil {
			t.Fatalf("rows2.json not on the host: %v\n%s", err, res)
		}
		if r.Environment == nil || r.Environment.Built || ix.downloads("tabulate", "0.9.0") != 1 {
			t.Fatalf("want the prepared environment reused (one download)\n%s", res)
		}

		// The argparse script, importing the package and the library.
		r, res = m.execJSON(t, 0, "", append(exec("--workspace", ws, sk, "--"), "python3", "scripts/render_table.py", "rows.json", "report.md", "--column", "amount", "--title", "Sales", "--top", "2")...)
		report, err := os.ReadFile(filepath.Join(ws, "report.md"))
		if err != nil || !strings.HasPrefix(string(report), "# Sales\n") || !strings.Contains(string(report), "total 400") ||
			!strings.Contains(string(report), "| east | 200 |") || strings.Contains(string(report), "south") {
			t.Fatalf("report.md on the host: %v\n%s\n%s", err, report, res)
		}

		// Code an agent writes, importing the skill's library.
		code := "import json; from report.stats import summarize; print(json.dumps(summarize(json.load(open('rows.json')), 'amount')))"
		r, res = m.execJSON(t, 0, "", append(exec("--workspace", ws, sk, "--"), "python3", "-c", code)...)
		var sum map[string]any
		if err := json.Unmarshal(r.Output, &sum); err != nil || sum["total"] != float64(400) || sum["count"] != float64(3) {
			t.Fatalf("want the library's summary of rows.json: %v\n%s", err, res)
		}

		// stdin passes through; --format raw prints the output as it is
		// and exits with the command's status.
		raw := m.run(t, "a,b\n1,2\n", append(exec("--format", "raw", sk, "--"), "sh", "-c", "cat; exit 3")...)
		if raw.code != 3 || raw.stdout != "a,b\n1,2\n" {
			t.Fatalf("raw: want stdin echoed and exit 3\n%s", raw)
		}
		m.assertClean(t)
	})
}

// TestInstructionOnlySkill: a skill with SKILL.md and references only is
// valid, listed and inspected; skill run refuses it (exit 2) pointing at
// skill exec; it is served over MCP without a tool (mcp_test checks the
// resources).
func TestInstructionOnlySkill(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		sk := m.example("release-notes")
		if res := m.run(t, "", "skill", "validate", sk); res.code != 0 || !strings.Contains(res.stdout, "no entry point") {
			t.Fatalf("validate\n%s", res)
		}
		res := m.run(t, "", "skill", "list", "--format", "json", filepath.Dir(sk))
		var rows []struct {
			Name  string `json:"name"`
			Valid bool   `json:"valid"`
			Entry string `json:"entry"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil {
			t.Fatalf("list: %v\n%s", err, res)
		}
		found := false
		for _, r := range rows {
			if r.Name == "release-notes" {
				found = r.Valid && r.Entry == ""
			}
		}
		if !found {
			t.Fatalf("release-notes not listed as a valid skill without entry\n%s", res)
		}
		if res := m.run(t, "", "skill", "inspect", sk); res.code != 0 {
			t.Fatalf("inspect\n%s", res)
		}
		res = m.run(t, "", "skill", "run", "--input", "{}", sk)
		if res.code != 2 || !strings.Contains(res.stderr, "no entry point") || !strings.Contains(res.stderr, "skill exec") || strings.Contains(res.stderr, "sandbox.yaml:") {
			t.Fatalf("want exit 2 naming skill exec, not sandbox.yaml\n%s", res)
		}
		m.assertClean(t)
		// Its files are there to read in its sandbox.
		r, out := m.execJSON(t, 0, "", "skill", "exec", sk, "--", "cat", "references/style.md")
		if !strings.Contains(string(r.Output), "House style") {
			t.Fatalf("want the reference read from /skill\n%s", out)
		}
	})
}

// TestExecBadInput: a missing or non-executable command ends as a shell's
// (127, 126) with a one-line error naming it; a --cwd outside the
// sandbox's folders, a --with that is a URL, a path or an option, and a
// sandbox without a command are refused before anything runs (exit 2,
// naming the flag). Nothing is left behind.
func TestExecBadInput(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		sk := m.example("release-notes")
		r, res := m.execJSON(t, 3, "", "skill", "exec", sk, "--", "no-such-command-x", "arg")
		if r.ExitCode != 127 || r.Error != "command not found: no-such-command-x" {
			t.Fatalf("want 127 and the command named\n%s", res)
		}
		r, res = m.execJSON(t, 3, "", "skill", "exec", sk, "--", "./SKILL.md")
		if r.ExitCode != 126 || r.Error != "command not executable: ./SKILL.md" {
			t.Fatalf("want 126 and the file named\n%s", res)
		}
		ws := workspace(t, m, nil)
		if res := m.run(t, "", "sandbox", "--workspace", ws, "--", "no-such-command-x"); res.code != 127 || !strings.Contains(res.stderr, "no-such-command-x: not found") {
			t.Fatalf("raw: want exit 127\n%s", res)
		}
		m.assertClean(t)
		// A workspace the sandbox's user cannot write: the clear refusal.
		if res := m.run(t, "", "sandbox", "--workspace", "/", "--", "true"); res.code != 2 || !strings.Contains(res.stderr, "--workspace") {
			t.Fatalf("want the workspace refused\n%s", res)
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"skill", "exec", "--cwd", "/etc", sk, "--", "true"}, "--cwd"},
			{[]string{"skill", "exec", "--cwd", "/skill/../etc", sk, "--", "true"}, "--cwd"},
			{[]string{"skill", "exec", "--with", "https://example.com/x.whl", sk, "--", "true"}, "--with"},
			{[]string{"skill", "exec", "--with", "./local/pkg", sk, "--", "true"}, "--with"},
			{[]string{"skill", "exec", "--with", "--index-url=http://x", sk, "--", "true"}, "--with"},
			{[]string{"sandbox", "--with", "npm:left-pad@file:../x", "--", "true"}, "--with"},
			{[]string{"sandbox"}, "no command"},
			{[]string{"sandbox", "--"}, "no command"},
			{[]string{"skill", "exec", sk}, "requires the skill folder and a command"},
		} {
			res := m.run(t, "", c.args...)
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if res.code != 2 || !strings.Contains(res.stderr, c.want) || len(lines) != 1 {
				t.Errorf("want exit 2 and one line naming %s\n%s", c.want, res)
			}
			m.assertClean(t)
		}

		// A skill with dependencies and nothing built yet: a bad --cwd or
		// --with is refused before the environment is built (no request
		// reaches the index, no cache folder is made).
		deps := m.example("table-report")
		for _, c := range []struct {
			flags []string
			want  string
		}{
			{[]string{"--cwd", "/etc"}, "--cwd"},
			{[]string{"--cwd", "/workspace"}, "--cwd"}, // no workspace granted
			{[]string{"--with", "https://example.com/x.whl"}, "--with"},
		} {
			ix := newPyIndex(t)
			ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
			cache := envCache(t, m)
			args := append([]string{"skill", "exec", "--env-cache", cache, "--pip-index-url", ix.url()}, c.flags...)
			res := m.run(t, "", append(args, deps, "--", "true")...)
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if res.code != 2 || !strings.Contains(res.stderr, c.want) || len(lines) != 1 {
				t.Errorf("want exit 2 and one line naming %s\n%s", c.want, res)
			}
			if n := ix.requests(); n != 0 {
				t.Errorf("%s: the index saw %d requests: the environment was built before the refusal\n%s", c.want, n, res)
			}
			if _, err := os.Stat(cache); err == nil {
				t.Errorf("%s: the refusal made the cache %s", c.want, cache)
			}
			m.assertClean(t)
		}
	})
}

// TestSandboxContainment: skillrun sandbox runs any command deny by
// default, proven from the host: the host's shadow file and a canary in
// the caller's home are not read, the caller's secret variable does not
// reach it, a write outside the workspace creates nothing, and no
// connection reaches a host listener (a granted name reaches the origin,
// the control).
func TestSandboxContainment(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := workspace(t, m, nil)
		home := "/root"
		if m.user != nil {
			home = m.user.HomeDir
		} else if os.Geteuid() != 0 {
			home = os.Getenv("HOME")
		}
		var b [8]byte
		rand.Read(b[:])
		canary := "skillrun-canary-" + hex.EncodeToString(b[:])
		canaryFile := filepath.Join(home, ".skillrun-exec-canary")
		if err := os.WriteFile(canaryFile, []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(canaryFile) })
		if m.user != nil {
			os.Chown(canaryFile, m.uid, m.gid)
		}
		// The control: the host's shadow file has content to leak (as
		// root the test reads it). Its hashes may all be "*" or "!", so
		// the proof is its whole lines absent from the output and cat's
		// failure, not only the hashes.
		shadow, err := os.ReadFile("/etc/shadow")
		if os.Geteuid() == 0 && (err != nil || len(strings.TrimSpace(string(shadow))) == 0) {
			t.Fatalf("control: the host's /etc/shadow is not readable as root or empty (%v): nothing to prove", err)
		}

		// The process is the workspace's; the probe's stdout is checked.
		probe := fmt.Sprintf("cat /etc/shadow; echo \"shadow-status=$?\"; cat %s; echo \"secret=[$SKILLRUN_CANARY]\"; env; touch /usr/skillrun-pwned /etc/skillrun-pwned %s/skillrun-pwned; echo done > out.txt", canaryFile, home)
		r, res := m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--", "sh", "-c", probe)
		out := string(r.Output) + r.Stderr
		if !strings.Contains(out, "secret=[]") {
			t.Fatalf("probe did not run\n%s", res)
		}
		if strings.Contains(out, canary) {
			t.Errorf("LEAK: the canary in the caller's home was read\n%s", res)
		}
		if strings.Contains(out, "canary-7f3a9") {
			t.Errorf("LEAK: the caller's SKILLRUN_CANARY reached the command\n%s", res)
		}
		if !strings.Contains(out, "shadow-status=") || strings.Contains(out, "shadow-status=0") {
			t.Errorf("LEAK: cat /etc/shadow succeeded in the sandbox (or did not run)\n%s", res)
		}
		for _, l := range strings.Split(string(shadow), "\n") {
			if f := strings.SplitN(l, ":", 3); len(f) == 3 && (strings.Contains(out, l) || len(f[1]) > 3 && strings.Contains(out, f[1])) {
				t.Errorf("LEAK: the host's /etc/shadow was read (%s's entry)", f[0])
			}
		}
		for _, p := range []string{"/usr/skillrun-pwned", "/etc/skillrun-pwned", filepath.Join(home, "skillrun-pwned")} {
			if _, err := os.Lstat(p); err == nil {
				os.Remove(p)
				t.Errorf("LEAK: %s was created on the host", p)
			}
		}
		if data, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(data) != "done\n" {
			t.Errorf("control: the workspace write did not reach the host: %v %q", err, data)
		}

		// Network: a listener on the host's loopback sees nothing, with
		// no grant and with a grant of another name; the granted name
		// reaches the origin (the control).
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var accepts atomic.Int64
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepts.Add(1)
				c.Close()
			}
		}()
		t.Cleanup(func() { l.Close() })
		port := l.Addr().(*net.TCPAddr).Port
		dial := fmt.Sprintf("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=2); print('connected')\nexcept OSError as e:\n    print('refused', e)\n", port)
		m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--", "python3", "-c", dial)
		m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--allow-host", fmt.Sprintf("other.test:%d", port), "--", "python3", "-c", dial)
		o := hostcheck.StartOrigin(t)
		get := "import sys, urllib.request\nfor u in sys.argv[1:]:\n    try:\n        print(urllib.request.urlopen(u, timeout=5).read().decode().strip())\n    except Exception as e:\n        print('refused', u, e)\n"
		r, res = m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws,
			"--allow-host", fmt.Sprintf("api.test:%d", o.Port), "--resolve", fmt.Sprintf("api.test:%d:127.0.0.1", o.Port),
			"--", "python3", "-c", get, fmt.Sprintf("http://api.test:%d/granted", o.Port), fmt.Sprintf("http://unlisted.test:%d/unlisted", o.Port), fmt.Sprintf("http://127.0.0.1:%d/direct", o.Port))
		time.Sleep(100 * time.Millisecond)
		if n := accepts.Load(); n != 0 {
			t.Errorf("LEAK: the host listener accepted %d connections from the sandbox", n)
		}
		seen := strings.Join(o.Seen(), "\n")
		if !strings.Contains(seen, "/granted") {
			t.Fatalf("control: the granted name did not reach the origin (seen %q)\n%s", seen, res)
		}
		if strings.Contains(seen, "/unlisted") || strings.Contains(seen, "/direct") {
			t.Errorf("LEAK: the origin saw a request the policy refuses: %q", seen)
		}
	})
}

// TestSandboxWith: --with adds packages to a sandbox's environment (built
// once, the second run hits the cache); a module that is missing is named
// in the result with how to add it.
func TestSandboxWith(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := workspace(t, m, nil)
		r, res := m.execJSON(t, 3, "", "sandbox", "--format", "json", "--workspace", ws, "--", "python3", "-c", "import tabulate")
		if r.MissingModule != "tabulate" || !strings.Contains(r.Error, "--with") || !strings.Contains(r.Error, "requirements.txt") {
			t.Fatalf("want the missing module named with how to add it\n%s", res)
		}
		ix := newPyIndex(t)
		ix.addWheel(t, "tabulate", "0.9.0", tabulateStandIn)
		args := []string{"sandbox", "--format", "json", "--workspace", ws, "--env-cache", envCache(t, m), "--pip-index-url", ix.url(),
			"--with", "tabulate==0.9.0", "--", "python3", "-c", "from tabulate import tabulate; print(tabulate([[1, 2]], headers=['a', 'b']))"}
		r, res = m.execJSON(t, 0, "", args...)
		if !strings.Contains(string(r.Output), "| 1 | 2 |") || r.Environment == nil || !r.Environment.Built {
			t.Fatalf("want the table from the --with package, built\n%s", res)
		}
		r, res = m.execJSON(t, 0, "", args...)
		if r.Environment == nil || r.Environment.Built || ix.downloads("tabulate", "0.9.0") != 1 {
			t.Fatalf("want the second run from the cache (one download)\n%s", res)
		}
	})
}

// TestSandboxForkBomb: a shell fork bomb is bounded by the task limit and
// the limit is named in the result (where the pids cgroup enforces it:
// its own events say it refused forks); nothing is left behind. The
// bomb's subshells outlive the ones that forked them, so the top shell
// spins on builtins (no fork of its own to be refused) long enough for
// the bomb to reach the limit before it ends the sandbox (it once ended
// after 54 ms, the limit not reached yet).
func TestSandboxForkBomb(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := workspace(t, m, nil)
		r, res := m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--pids", "20", "--timeout", "10s",
			"--", "sh", "-c", "f() { f | f & }; f; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo survived")
		if r.Limits == nil || !r.Limits.Cgroups {
			t.Skipf("skipped: no pids cgroup in this mode (limits %+v): the task limit is RLIMIT_NPROC, which reports nothing", r.Limits)
		}
		if !strings.Contains(strings.Join(r.Warnings, "\n"), "the task limit (20) was reached") && r.StoppedReason != "pids" {
			t.Errorf("the task limit is not named\n%s", res)
		}
	})
}

// TestPeakMemoryIsTheProgram's: with cgroups, usage.peak_memory_bytes is
// the program's own peak (the cgroup's high-water mark since its exec),
// not the runtime's Go init before it: a shell that does nothing peaks
// far below the init's ~20 MiB, and one holding 64 MiB shows it (the
// control).
func TestPeakMemoryIsTheProgram(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := workspace(t, m, nil)
		idle, res := m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--", "sh", "-c", "true")
		if idle.Limits == nil || !idle.Limits.Cgroups {
			t.Skipf("skipped: no memory cgroup in this mode: the peak is a process's RSS, which includes the init")
		}
		big, res2 := m.execJSON(t, 0, "", "sandbox", "--format", "json", "--workspace", ws, "--", "python3", "-c", "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])")
		if big.Usage.PeakMemoryBytes < 64<<20 {
			t.Fatalf("control: 64 MiB held, peak %d\n%s", big.Usage.PeakMemoryBytes, res2)
		}
		if idle.Usage.PeakMemoryBytes >= 12<<20 {
			t.Errorf("sh -c true peaked at %d bytes: the runtime's init is counted\n%s", idle.Usage.PeakMemoryBytes, res)
		}
	})
}

// TestExecRawSignalAndStreaming: --format raw (skill exec's option,
// sandbox's default) exits 128+N when the command is killed by signal N,
// a fault of its own (SIGSEGV: 139) or SIGKILL sent from the host (137),
// and streams stdout and stderr as they come: the first lines reach the
// caller's pipes while the command still sleeps before its last line.
// The command is PID 1 of the sandbox's PID namespace, so a signal it
// sends itself with the default action (sh -c 'kill -TERM $$') is
// ignored, as in any container without an init; those are not tested.
func TestExecRawSignalAndStreaming(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		sk := m.example("release-notes")
		verbs := map[string][]string{
			"skill exec": {"skill", "exec", "--format", "raw", sk, "--"},
			"sandbox":    {"sandbox", "--workspace", workspace(t, m, nil), "--"},
		}
		segv := []string{"python3", "-c", "import ctypes, resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0)); ctypes.string_at(0)"}
		for verb, pre := range verbs {
			res := m.run(t, "", append(pre, segv...)...)
			if res.code != 139 || !strings.Contains(res.stderr, "signal 11") {
				t.Errorf("%s: a segfault: want exit 139 and the signal named\n%s", verb, res)
			}
			m.assertClean(t)

			// SIGKILL from the host to the sandbox's command, found in
			// /proc by its unique arguments.
			var b [4]byte
			rand.Read(b[:])
			secs := fmt.Sprintf("30.%d", 1000+int(b[0])<<8|int(b[1]))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			cmd := m.commandContext(ctx, append(pre, "sleep", secs)...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				cancel()
				t.Fatal(err)
			}
			pid := waitProc(t, []string{"sleep", secs}, 20*time.Second)
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			cmd.Wait()
			cancel()
			if code := cmd.ProcessState.ExitCode(); pid <= 0 || code != 137 {
				t.Errorf("%s: SIGKILL from the host (pid %d): exit %d, want 137\nstderr: %s", verb, pid, code, errb.String())
			}
			m.assertClean(t)

			// Streaming: out1 and err1, then 2 s of sleep, then out2.
			ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
			cmd = m.commandContext(ctx, append(pre, "sh", "-c", "echo out1; echo err1 >&2; sleep 2; echo out2")...)
			stdout, _ := cmd.StdoutPipe()
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				cancel()
				t.Fatal(err)
			}
			type line struct {
				text string
				at   time.Time
			}
			lines := func(r io.Reader) chan []line {
				ch := make(chan []line, 1)
				go func() {
					var got []line
					sc := bufio.NewScanner(r)
					for sc.Scan() {
						got = append(got, line{sc.Text(), time.Now()})
					}
					ch <- got
				}()
				return ch
			}
			outc, errc := lines(stdout), lines(stderr)
			outs, errs := <-outc, <-errc
			cmd.Wait()
			ended := time.Now()
			cancel()
			var errLines []line
			for _, l := range errs {
				if !strings.HasPrefix(l.text, "skillrun: warning:") {
					errLines = append(errLines, l)
				}
			}
			if cmd.ProcessState.ExitCode() != 0 || len(outs) != 2 || outs[0].text != "out1" || outs[1].text != "out2" || len(errLines) != 1 || errLines[0].text != "err1" {
				t.Errorf("%s: want exit 0, out1 and out2 on stdout, err1 on stderr: exit %d, %v, %v", verb, cmd.ProcessState.ExitCode(), outs, errs)
			} else {
				// Buffered output would arrive at the end, with out2.
				if d := outs[1].at.Sub(outs[0].at); d < time.Second {
					t.Errorf("%s: stdout not streamed: out1 arrived %v before out2 (the command slept 2 s between them)", verb, d)
				}
				if d := ended.Sub(errLines[0].at); d < time.Second {
					t.Errorf("%s: stderr not streamed: err1 arrived %v before the command ended (it slept 2 s after it)", verb, d)
				}
			}
			m.assertClean(t)
		}
	})
}

// waitProc finds the host pid of the process whose argv is exactly argv,
// waiting up to d; 0 when none appeared.
func waitProc(t *testing.T, argv []string, d time.Duration) int {
	t.Helper()
	want := strings.Join(argv, "\x00") + "\x00"
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && string(b) == want {
				return pid
			}
		}
	}
	return 0
}

// TestExecNode: the Node side of skill exec and sandbox, host-verified. A
// module that is not installed is named in the result with how to add it
// (no registry needed); a skill keeping its package.json in scripts/ runs
// its script with the package from the registry (through the allowlist);
// sandbox --with npm:NAME@VERSION adds a package without a skill. One
// small package (is-number), built once per environment.
func TestExecNode(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := workspace(t, m, nil)
		r, res := m.execJSON(t, 3, "", "sandbox", "--format", "json", "--workspace", ws, "--", "node", "-e", "require('left-pad')")
		if r.MissingModule != "left-pad" || !strings.Contains(r.Error, "--with npm:left-pad@VERSION") || !strings.Contains(r.Error, "package.json") {
			t.Fatalf("want the missing Node module named with how to add it\n%s", res)
		}

		npmReachable(t)
		cache := envCache(t, m)
		flags := append([]string{"--env-cache", cache}, caFlags()...)
		sk := depsSkill(t, "nodescripts", map[string]string{
			"scripts/package.json": `{"name":"nodescripts","version":"1.0.0","dependencies":{"is-number":"7.0.0"}}`,
			"scripts/check.js": `const isNumber = require('is-number');
console.log(JSON.stringify({ arg: isNumber(process.argv[2]), word: isNumber('x'), where: require.resolve('is-number') }));
`,
		})
		args := append(append([]string{"skill", "exec", "--workspace", ws}, flags...), sk, "--", "node", "scripts/check.js", "7")
		r, res = m.execJSON(t, 0, "", args...)
		var out struct {
			Arg, Word bool
			Where     string
		}
		if err := json.Unmarshal(r.Output, &out); err != nil || !out.Arg || out.Word || out.Where != "/node_modules/is-number/index.js" {
			t.Fatalf("want is-number from /node_modules in scripts/check.js: %v\n%s", err, res)
		}
		if r.Environment == nil || !r.Environment.Built || strings.Join(r.Environment.Node, ",") != "is-number@7.0.0" {
			t.Fatalf("want the environment of scripts/package.json built\n%s", res)
		}
		if strings.Join(r.Command, " ") != "node /skill/scripts/check.js 7" || r.Cwd != "/workspace" {
			t.Errorf("want the script resolved in /skill, run from /workspace\n%s", res)
		}
		// The skill's environment has is-number only.
		r, res = m.execJSON(t, 3, "", append(append([]string{"skill", "exec"}, flags...), sk, "--", "node", "-e", "require('left-pad')")...)
		if r.MissingModule != "left-pad" || r.Environment == nil || r.Environment.Built {
			t.Errorf("want the prepared environment reused and left-pad named\n%s", res)
		}

		// sandbox --with npm:NAME@VERSION: the package without a skill,
		// built in a cache of its own (the same packages in the skill's
		// cache would share its environment).
		args = append(append([]string{"sandbox", "--format", "json", "--workspace", ws, "--env-cache", envCache(t, m)}, caFlags()...),
			"--with", "npm:is-number@7.0.0", "--", "node", "-e", "console.log(require('is-number')(5))")
		r, res = m.execJSON(t, 0, "", args...)
		if strings.TrimSpace(string(r.Output)) != "true" || r.Environment == nil || !r.Environment.Built || strings.Join(r.Environment.Node, ",") != "is-number@7.0.0" {
			t.Fatalf("want is-number from --with npm:is-number@7.0.0\n%s", res)
		}
	})
}
