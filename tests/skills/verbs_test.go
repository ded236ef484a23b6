//go:build integration

package skills_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// examples are the example skills with an entry point (one tool each
// over MCP); allExamples adds those used through their scripts.
var (
	examples    = []string{"calculator", "csv-summary", "fetch-url", "json-transform", "save-note", "slugify", "text-stats"}
	allExamples = []string{"calculator", "csv-summary", "fetch-url", "json-transform", "release-notes", "save-note", "slugify", "table-report", "text-stats"}
)

func TestValidate(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, name := range examples {
			res := m.run(t, "", "skill", "validate", m.example(name))
			if res.code != 0 || !strings.Contains(res.stdout, ": ok ("+name) {
				t.Errorf("validate %s\n%s", name, res)
			}
		}
		dir := filepath.Join(ownedDir(t, m), "Bad_Skill")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: Bad_Skill\n---\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "sandbox.yaml"), []byte("limits:\n  memroy: 1G\n"), 0o644)
		res := m.run(t, "", "skill", "validate", dir)
		if res.code != 2 || res.stdout != "" {
			t.Fatalf("invalid skill: want exit 2, nothing on stdout\n%s", res)
		}
		for _, w := range []string{"SKILL.md: name:", "SKILL.md: description: required", "sandbox.yaml:", "memroy"} {
			if !strings.Contains(res.stderr, w) {
				t.Errorf("stderr does not mention %q\n%s", w, res)
			}
		}
	})
}

func TestInspect(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		get := func(format string) map[string]any {
			t.Helper()
			res := m.run(t, "", "skill", "inspect", "--format", format, m.example("calculator"))
			if res.code != 0 {
				t.Fatalf("%s", res)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
				t.Fatalf("%v\n%s", err, res)
			}
			return v
		}
		schemaOK := func(s any) {
			t.Helper()
			sch, _ := s.(map[string]any)
			if sch["type"] != "object" || sch["properties"] == nil || sch["$schema"] != nil {
				t.Errorf("schema = %v", s)
			}
		}
		j := get("json")
		if j["name"] != "calculator" || j["entry"].(map[string]any)["path"] != "scripts/main.py" || j["policy"] == nil {
			t.Errorf("json = %v", j)
		}
		o := get("openai")
		if o["type"] != "function" {
			t.Errorf("openai = %v", o)
		}
		fn := o["function"].(map[string]any)
		if fn["name"] != "calculator" || fn["description"] == "" {
			t.Errorf("openai function = %v", fn)
		}
		schemaOK(fn["parameters"])
		a := get("anthropic")
		if a["name"] != "calculator" || len(a) != 3 {
			t.Errorf("anthropic = %v", a)
		}
		schemaOK(a["input_schema"])
		p := get("mcp")
		if p["name"] != "calculator" {
			t.Errorf("mcp = %v", p)
		}
		schemaOK(p["inputSchema"])
		// argparse inference reaches the tool definition.
		res := m.run(t, "", "skill", "inspect", "--format", "anthropic", m.example("csv-summary"))
		if !strings.Contains(res.stdout, `"group_by"`) || !strings.Contains(res.stdout, `"required": [`) {
			t.Errorf("csv-summary schema not inferred\n%s", res)
		}
		if res := m.run(t, "", "skill", "inspect", "--format", "yaml", m.example("calculator")); res.code != 2 {
			t.Errorf("bad format: want exit 2\n%s", res)
		}
	})
}

func TestList(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		res := m.run(t, "", "skill", "list", "--format", "json", filepath.Join(m.data, "examples"))
		if res.code != 0 {
			t.Fatalf("%s", res)
		}
		var rows []struct {
			Name  string `json:"name"`
			Valid bool   `json:"valid"`
			Path  string `json:"path"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &rows); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rows {
			if !r.Valid {
				t.Errorf("%s invalid", r.Path)
			}
			names = append(names, r.Name)
		}
		if strings.Join(names, ",") != strings.Join(allExamples, ",") {
			t.Errorf("found %v, want %v", names, allExamples)
		}
		res = m.run(t, "", "skill", "list", filepath.Join(m.data, "examples", "skills"))
		if res.code != 0 || !strings.HasPrefix(res.stdout, "NAME") || strings.Count(res.stdout, "\n") != len(allExamples)+1 {
			t.Errorf("table\n%s", res)
		}
	})
}

func TestBundleThenRun(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		out := filepath.Join(ownedDir(t, m), "bundle")
		if m.user != nil {
			// The unprivileged user creates it itself.
			out = filepath.Join(m.tmp, "bundle")
		}
		res := m.run(t, "", "skill", "bundle", "-o", out, m.example("calculator"))
		if res.code != 0 {
			t.Fatalf("%s", res)
		}
		if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
			t.Fatal(err)
		}
		res = m.run(t, `{"expression": "6*7"}`, "run", out)
		if res.code != 0 || !strings.Contains(res.stdout, `"result": 42`) {
			t.Fatalf("run the bundle\n%s", res)
		}
		// Bundling into a non-empty folder is refused; a policy refusal
		// leaves nothing behind.
		if res := m.run(t, "", "skill", "bundle", "-o", out, m.example("calculator")); res.code != 2 {
			t.Errorf("non-empty output: want exit 2\n%s", res)
		}
		refused := filepath.Join(m.tmp, "refused")
		if res := m.run(t, "", "skill", "bundle", "-o", refused, m.example("fetch-url")); res.code != 6 || !strings.Contains(res.stderr, "network") {
			t.Errorf("policy: want exit 6\n%s", res)
		}
		if _, err := os.Stat(refused); !os.IsNotExist(err) {
			t.Errorf("refused bundle left behind: %v", err)
		}
		os.RemoveAll(out)
	})
}

func TestRunUsageErrors(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"skill", "run", "--input", `{"expression": 1}`, m.example("calculator")}, "/expression"},
			{[]string{"skill", "run", "--input", `{"expression": "1", "extra": 2}`, m.example("calculator")}, "extra"},
			{[]string{"skill", "run", "--input", `not json`, m.example("calculator")}, "input: not valid JSON"},
			{[]string{"skill", "run", "--memory", "lots", m.example("calculator")}, "--memory"},
			{[]string{"skill", "run", "--format", "xml", m.example("calculator")}, "--format"},
			{[]string{"skill", "run", "--env", "PATH=/x", "--input", `{"expression": "1"}`, m.example("calculator")}, "PATH"},
			{[]string{"skill", "run", "--input", "{}", "--input-file", "x", m.example("calculator")}, "exclusive"},
			{[]string{"skill", "run", filepath.Join(m.data, "examples")}, "no SKILL.md"},
			// Flags may follow the folder: this one is parsed (and refused).
			{[]string{"skill", "run", m.example("calculator"), "--timeout", "-1s"}, "--timeout"},
		} {
			res := m.run(t, "", tc.args...)
			if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, tc.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
				t.Errorf("want exit 2, empty stdout, one stderr line with %q\n%s", tc.want, res)
			}
			m.assertClean(t)
		}
	})
}

func TestRunInputSources(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		res := m.run(t, `{"expression": "1+1"}`, "skill", "run", m.example("calculator"))
		if res.code != 0 || !strings.Contains(res.stdout, `"result":2`) {
			t.Errorf("stdin\n%s", res)
		}
		f := filepath.Join(m.tmp, "in.json")
		os.WriteFile(f, []byte(`{"expression": "2+2"}`), 0o644)
		res = m.run(t, "", "skill", "run", "--input-file", f, m.example("calculator"))
		os.Remove(f)
		if res.code != 0 || !strings.Contains(res.stdout, `"result":4`) {
			t.Errorf("input file\n%s", res)
		}
		res = m.run(t, "", "skill", "run", "--format", "text", "--input", `{"expression": "3+3"}`, m.example("calculator"))
		if res.code != 0 || !strings.HasPrefix(res.stdout, "calculator: ok, exit 0") || !strings.Contains(res.stdout, `output: {"expression":"3+3","result":6}`) {
			t.Errorf("text format\n%s", res)
		}
	})
}

// TestSpecWarnings: a skill that deviates from the Agent Skills spec
// without touching the sandbox (a description of 1068 characters, as
// Anthropic's claude-api has) runs, bundles, prepares and is inspected,
// each verb naming the deviation once as a warning on stderr (stdout is
// the verb's output alone); skill validate --strict refuses it.
func TestSpecWarnings(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		dir := filepath.Join(ownedDir(t, m), "long-description")
		desc := strings.Repeat("Long description. ", 60)[:1068]
		files := map[string]string{
			"SKILL.md": "---\nname: long-description\ndescription: " + desc + "\n---\n",
			"main.py":  "print('{\"ok\": true}')\n",
		}
		os.MkdirAll(dir, 0o755)
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		const warning = "warning: skill \"long-description\": SKILL.md: description: 1068 characters, at most 1024"
		once := func(verb string, res result) {
			t.Helper()
			if strings.Count(res.stderr, warning) != 1 || strings.Contains(res.stdout, "skillrun: warning") {
				t.Errorf("%s: want the warning once on stderr, not on stdout\n%s", verb, res)
			}
		}

		r, res := m.skillRun(t, 0, dir, "{}")
		if !r.OK || strings.ReplaceAll(string(r.Output), " ", "") != `{"ok":true}` {
			t.Fatalf("run: want the skill's output\n%s", res)
		}
		once("run", res)
		once("exec", m.run(t, "", "skill", "exec", dir, "--", "true"))
		res = m.run(t, "", "skill", "inspect", dir)
		if res.code != 0 || !json.Valid([]byte(res.stdout)) {
			t.Fatalf("inspect\n%s", res)
		}
		once("inspect", res)
		out := filepath.Join(m.tmp, "bundle")
		if res = m.run(t, "", "skill", "bundle", "-o", out, dir); res.code != 0 {
			t.Fatalf("bundle\n%s", res)
		}
		os.RemoveAll(out)
		once("bundle", res)
		if res = m.run(t, "", "skill", "prepare", "--env-cache", envCache(t, m), dir); res.code != 0 {
			t.Fatalf("prepare\n%s", res)
		}
		once("prepare", res)
		m.assertClean(t)

		if res := m.run(t, "", "skill", "validate", dir); res.code != 0 || !strings.Contains(res.stderr, "warning: SKILL.md: description: 1068 characters") {
			t.Errorf("validate: want ok with the warning\n%s", res)
		}
		if res := m.run(t, "", "skill", "validate", "--strict", dir); res.code != 2 || !strings.Contains(res.stderr, "error: SKILL.md: description: 1068 characters") {
			t.Errorf("validate --strict: want exit 2 naming the description\n%s", res)
		}
	})
}
