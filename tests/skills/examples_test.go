//go:build integration

package skills_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamples(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		check := func(name, input, want string, flags ...string) skillResult {
			t.Helper()
			r, res := m.skillRun(t, 0, m.example(name), input, flags...)
			if !r.OK || r.ExitCode != 0 || r.Skill != name || !strings.Contains(string(r.Output), want) {
				t.Errorf("%s: output does not contain %s\n%s", name, want, res)
			}
			if r.Usage.WallMS <= 0 || r.Limits == nil || r.Limits.Network != "none" {
				t.Errorf("%s: usage/limits\n%s", name, res)
			}
			if m.uid == 0 && !r.Limits.Cgroups {
				t.Errorf("%s: cgroups not applied as root\n%s", name, res)
			}
			// Without cgroups rlimits stand in for memory (and pids on
			// Linux 5.14+); the CPU quota has no stand-in.
			if !r.Limits.Cgroups && (!strings.Contains(strings.Join(r.Limits.NotEnforced, ","), "cpus") || !strings.HasPrefix(r.Limits.Enforcement["memory"].EnforcedBy, "rlimit_")) {
				t.Errorf("%s: limits without cgroups not reported\n%s", name, res)
			}
			return r
		}
		check("calculator", `{"expression": "2 * (3 + 4) ** 2"}`, `"result":98`)
		check("text-stats", `{"text": "a b a\nc", "top": 1}`, `{"lines":2,"words":4,"chars":7,"top_words":[["a",2]]}`)
		check("csv-summary", `{"data": "k,v\nx,1\ny,3\nx,5", "group_by": "k"}`, `"x":{"rows":2,"mean_v":3.0}`)
		check("json-transform", `{"data": {"a": [{"n": 1}, {"n": 5}]}, "query": ".a[] | select(.n > 2) | .n"}`, `{"results":[5]}`)

		// calculator reports a bad expression as a skill failure (exit 3).
		r, res := m.skillRun(t, 3, m.example("calculator"), `{"expression": "__import__('os')"}`)
		if r.OK || r.ExitCode != 1 || !strings.Contains(r.Stderr, "unsupported syntax") {
			t.Errorf("calculator failure\n%s", res)
		}

		// save-note: refused without a workspace, writes into a granted one.
		r, res = m.skillRun(t, 6, m.example("save-note"), `{"path": "n.md", "content": "hi"}`)
		if r.StoppedReason != "policy" || !strings.Contains(r.Error, "--workspace") {
			t.Errorf("save-note without workspace\n%s", res)
		}
		ws := ownedDir(t, m)
		r = check("save-note", `{"path": "notes/today.md", "content": "buy milk"}`, `"saved":"notes/today.md"`, "--workspace", ws)
		if !r.Limits.Workspace {
			t.Error("workspace not reported")
		}
		if b, err := os.ReadFile(filepath.Join(ws, "notes", "today.md")); err != nil || string(b) != "buy milk" {
			t.Errorf("host does not see the note: %q %v", b, err)
		}
		r, res = m.skillRun(t, 3, m.example("save-note"), `{"path": "../escape.md", "content": "x"}`, "--workspace", ws)
		if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.md")); err == nil {
			t.Errorf("save-note wrote outside the workspace\n%s", res)
		}

		// fetch-url: refused by policy before running, with a clear message.
		for _, flags := range [][]string{nil, {"--network", "example.com"}} {
			r, res = m.skillRun(t, 6, m.example("fetch-url"), `{"url": "https://example.com"}`, flags...)
			if r.StoppedReason != "policy" || r.ExitCode != -1 || r.Limits != nil || !strings.Contains(r.Error, "network") {
				t.Errorf("fetch-url %v\n%s", flags, res)
			}
		}
		// With full host network granted it runs (the result depends on the
		// host's connectivity, the grant must be labelled).
		r, res = m.skillRun(t, exitOf(t, m, "--network", "host"), m.example("fetch-url"), `{"url": "https://example.com", "max_bytes": 10}`, "--network", "host")
		if r.Limits == nil || r.Limits.Network != "host" {
			t.Errorf("fetch-url with --network=host\n%s", res)
		}
	})
}

// exitOf runs fetch-url once to learn whether the host has network (0) or
// not (3); the test then checks the labelled grant either way.
func exitOf(t *testing.T, m *mode, flags ...string) int {
	res := m.run(t, "", append(append([]string{"skill", "run"}, flags...), "--input", `{"url": "https://example.com", "max_bytes": 10}`, m.example("fetch-url"))...)
	var r skillResult
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	if res.code != 0 && res.code != 3 {
		t.Fatalf("fetch-url with --network=host: want exit 0 or 3\n%s", res)
	}
	return res.code
}
