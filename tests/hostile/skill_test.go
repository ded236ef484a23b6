//go:build integration

package hostile_test

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// shEntry is an entry point that prints a fixed JSON object.
const shEntry = "#!/bin/sh\necho '{\"ran\": true}'\n"

// skillCase is a hostile skill folder. files are written first (a nil
// map: the folder is not made), then prepare runs (special files). want
// are substrings the one error line must contain.
type skillCase struct {
	name    string
	files   func(name string) map[string]string
	prepare func(t *testing.T, m *mode, dir string)
	want    []string
}

func withSkillMD(md func(name string) string) func(string) map[string]string {
	return func(name string) map[string]string {
		return map[string]string{"SKILL.md": md(name), "scripts/main.sh": shEntry}
	}
}

func withManifest(manifest string) func(string) map[string]string {
	return func(name string) map[string]string {
		return map[string]string{"SKILL.md": skillMD(name), "scripts/main.sh": shEntry, "sandbox.yaml": manifest}
	}
}

func validFiles(name string) map[string]string {
	return map[string]string{"SKILL.md": skillMD(name), "scripts/main.sh": shEntry}
}

func mkfifo(rel string) func(t *testing.T, m *mode, dir string) {
	return func(t *testing.T, m *mode, dir string) {
		p := filepath.Join(dir, rel)
		os.Remove(p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(p, 0o666); err != nil {
			t.Fatal(err)
		}
		m.chown(t, p)
	}
}

// mknod makes a character device: /dev/zero's numbers (reading it never
// ends) or /dev/mem's (reading it would read host memory).
func mknod(rel string, minor int) func(t *testing.T, m *mode, dir string) {
	return func(t *testing.T, m *mode, dir string) {
		p := filepath.Join(dir, rel)
		os.Remove(p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|minor); err != nil {
			t.Skipf("skipped: mknod %s: %v", p, err)
		}
	}
}

func symlink(target, rel string) func(t *testing.T, m *mode, dir string) {
	return func(t *testing.T, m *mode, dir string) {
		p := filepath.Join(dir, rel)
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		m.chown(t, p)
	}
}

func hostileSkills() []skillCase {
	garbage := make([]byte, 8192)
	rand.New(rand.NewSource(7)).Read(garbage)
	return []skillCase{
		{"bad yaml", withSkillMD(func(n string) string { return "---\nname: [" + n + "\n---\n" }), nil, []string{"SKILL.md: front matter"}},
		{"no front matter", withSkillMD(func(n string) string { return "# " + n + "\nno header\n" }), nil, []string{"SKILL.md", "front matter"}},
		{"unclosed front matter", withSkillMD(func(n string) string { return "---\nname: " + n + "\ndescription: d\n" }), nil, []string{"SKILL.md", "not closed"}},
		{"empty SKILL.md", withSkillMD(func(string) string { return "" }), nil, []string{"SKILL.md", "front matter"}},
		{"name missing", withSkillMD(func(string) string { return "---\ndescription: d\n---\n" }), nil, []string{"SKILL.md: name: required"}},
		{"name wrong type", withSkillMD(func(n string) string { return "---\nname: [" + n + "]\ndescription: d\n---\n" }), nil, []string{"SKILL.md", "line 2: name"}},
		{"description wrong type", withSkillMD(func(n string) string { return "---\nname: " + n + "\ndescription: {a: 1}\n---\n" }), nil, []string{"SKILL.md", "description"}},
		{"metadata wrong type", withSkillMD(func(n string) string { return "---\nname: " + n + "\ndescription: d\nmetadata: [1, 2]\n---\n" }), nil, []string{"SKILL.md: metadata"}},
		{"huge front matter", withSkillMD(func(n string) string {
			return "---\nname: " + n + "\ndescription: d\nx: " + strings.Repeat("a", 2<<20) + "\n---\n"
		}), nil, []string{"SKILL.md", "limit"}},
		{"binary garbage", withSkillMD(func(string) string { return string(garbage) }), nil, []string{"SKILL.md"}},
		{"binary in front matter", withSkillMD(func(n string) string {
			return "---\nname: " + n + "\ndescription: " + strings.ReplaceAll(string(garbage[:300]), "\n", "") + "\n---\n"
		}), nil, []string{"SKILL.md"}},
		{"deeply nested front matter", withSkillMD(func(n string) string {
			return "---\nname: " + n + "\ndescription: d\nx: " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n---\n"
		}), nil, []string{"SKILL.md", "depth"}},
		{"no SKILL.md", func(string) map[string]string { return map[string]string{"scripts/main.sh": shEntry} }, nil, []string{"SKILL.md"}},
		{"SKILL.md is a FIFO", validFiles, mkfifo("SKILL.md"), []string{"SKILL.md", "FIFO"}},
		{"SKILL.md is a char device", validFiles, mknod("SKILL.md", 5), []string{"SKILL.md", "character device"}},
		{"SKILL.md is a folder", validFiles, func(t *testing.T, m *mode, dir string) {
			os.Remove(filepath.Join(dir, "SKILL.md"))
			os.Mkdir(filepath.Join(dir, "SKILL.md"), 0o755)
		}, []string{"SKILL.md", "folder"}},
		{"SKILL.md links outside", validFiles, symlink("/etc/passwd", "SKILL.md"), []string{"SKILL.md", "outside the skill folder"}},
		{"manifest unknown key", withManifest("limits:\n  memroy: 1G\n"), nil, []string{"sandbox.yaml", "line 2", "memroy"}},
		{"manifest unknown top key", withManifest("netwrok: {}\n"), nil, []string{"sandbox.yaml", "netwrok"}},
		{"manifest wrong types", withManifest("limits:\n  memory: [1]\n"), nil, []string{"sandbox.yaml", "limits.memory"}},
		{"manifest wrong type list", withManifest("env: API_TOKEN\n"), nil, []string{"sandbox.yaml", "env"}},
		{"manifest cpus string", withManifest("limits:\n  cpus: lots\n"), nil, []string{"sandbox.yaml", "limits.cpus"}},
		{"manifest bad yaml", withManifest("limits: [\n"), nil, []string{"sandbox.yaml"}},
		{"manifest binary", withManifest(string(garbage[:2000])), nil, []string{"sandbox.yaml"}},
		{"manifest huge", withManifest("# " + strings.Repeat("x", 1<<20) + "\n"), nil, []string{"sandbox.yaml", "limit"}},
		{"manifest is a FIFO", validFiles, mkfifo("sandbox.yaml"), []string{"sandbox.yaml", "FIFO"}},
		{"manifest links outside", validFiles, symlink("/etc/shadow", "sandbox.yaml"), []string{"sandbox.yaml", "outside the skill folder"}},
		{"schema is a FIFO", withManifest("input:\n  schema: schema.json\n"), mkfifo("schema.json"), []string{"schema.json", "FIFO"}},
		{"schema huge", func(n string) map[string]string {
			f := withManifest("input:\n  schema: schema.json\n")(n)
			f["schema.json"] = `{"description": "` + strings.Repeat("s", 2<<20) + `"}`
			return f
		}, nil, []string{"schema.json", "limit"}},
		{"entry is a FIFO", withManifest("entry: scripts/main.sh\n"), mkfifo("scripts/main.sh"), []string{"entry", "scripts/main.sh", "FIFO"}},
		{"entry is a char device", withManifest("entry: scripts/main.sh\n"), mknod("scripts/main.sh", 1), []string{"entry", "scripts/main.sh", "character device"}},
		{"entry links outside", withManifest("entry: scripts/main.sh\n"), symlink("/bin/sh", "scripts/main.sh"), []string{"entry", "outside the skill folder"}},
		{"folder is a file", nil, func(t *testing.T, m *mode, dir string) { m.writeFile(t, dir, []byte("x")) }, []string{"not a directory"}},
		{"folder is a FIFO", nil, func(t *testing.T, m *mode, dir string) { mkfifo(filepath.Base(dir))(t, m, filepath.Dir(dir)) }, []string{"not a directory"}},
		{"folder missing", nil, nil, []string{"no such file"}},
		{"folder symlink loop", nil, func(t *testing.T, m *mode, dir string) {
			symlink(filepath.Base(dir), filepath.Base(dir))(t, m, filepath.Dir(dir))
		}, []string{"too many links"}},
		{"folder dangling symlink", nil, func(t *testing.T, m *mode, dir string) {
			symlink("/nonexistent", filepath.Base(dir))(t, m, filepath.Dir(dir))
		}, []string{"no such file"}},
	}
}

// TestHostileSkill gives each hostile skill folder to skill validate,
// inspect, bundle and run: exit 2, one error line naming the file and
// field, never blocking, nothing left behind. skill list of the parent
// lists it (valid or not) and exits 0.
// TestHostileSkillWarnings: deviations from the Agent Skills
// specification that do not touch the sandbox (a name other than the
// folder's, a description over 1024 characters) load with a one-line
// warning naming the file and field; skill validate --strict refuses
// them (exit 2).
func TestHostileSkillWarnings(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, c := range []struct {
			name  string
			files func(name string) map[string]string
			want  string
		}{
			{"name mismatch", withSkillMD(func(string) string { return skillMD("someone-else") }), `SKILL.md: name: "someone-else" does not match the folder name`},
			{"huge description", withSkillMD(func(n string) string {
				return "---\nname: " + n + "\ndescription: " + strings.Repeat("d", 5000) + "\n---\n"
			}), "SKILL.md: description: 5000 characters, at most 1024"},
		} {
			t.Run(c.name, func(t *testing.T) {
				name := uniqueSkill("w")
				dir := m.skill(t, nonName.ReplaceAllString(c.name, "_"), name, c.files(name))
				res := m.run(t, opts{timeout: 20 * time.Second}, "skill", "validate", dir)
				if res.code != 0 || !strings.Contains(res.stderr, "warning: "+c.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
					t.Errorf("validate: want exit 0 and one warning line\n%s", res)
				}
				res = m.run(t, opts{timeout: 20 * time.Second}, "skill", "validate", "--strict", dir)
				if res.code != 2 || !strings.Contains(res.stderr, "error: "+c.want) {
					t.Errorf("validate --strict: want exit 2 naming the field\n%s", res)
				}
			})
		}
	})
}

func TestHostileSkill(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, c := range hostileSkills() {
			t.Run(c.name, func(t *testing.T) {
				name := uniqueSkill("h")
				parent := nonName.ReplaceAllString(c.name, "_")
				var dir string
				if c.files != nil {
					dir = m.skill(t, parent, name, c.files(name))
				} else {
					dir = filepath.Join(m.mkdir(t, parent), name)
				}
				if c.prepare != nil {
					c.prepare(t, m, dir)
				}
				out := filepath.Join(m.dir, "bundle-out")
				for _, args := range [][]string{
					{"skill", "validate", dir},
					{"skill", "inspect", dir},
					{"skill", "inspect", "--format", "openai", dir},
					{"skill", "bundle", "-o", out, dir},
					{"skill", "run", "--input", "{}", dir},
					{"skill", "run", dir},
				} {
					res := m.run(t, opts{stdin: strings.NewReader("{}"), timeout: 20 * time.Second}, args...)
					wantError(t, res, 2, c.want...)
				}
				if _, err := os.Lstat(out); err == nil {
					ents, _ := os.ReadDir(out)
					if len(ents) > 0 {
						t.Errorf("skill bundle of a refused skill left %s with %d entries", out, len(ents))
					}
				}
				for _, format := range []string{"table", "json"} {
					res := m.run(t, opts{timeout: 20 * time.Second}, "skill", "list", "--format", format, filepath.Dir(dir))
					if res.code != 0 || strings.Contains(res.stderr, "panic") {
						t.Errorf("skill list must list broken skills and exit 0\n%s", res)
					}
					if format == "json" && !json.Valid([]byte(res.stdout)) {
						t.Errorf("skill list --format json is not JSON\n%s", res)
					}
				}
				m.assertClean(t, nil, name)
			})
		}
	})
}

// TestSkillFolderSymlink: a skill folder reached through a symlink (with
// another name) is the folder it resolves to, as documented; it runs.
func TestSkillFolderSymlink(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		name := uniqueSkill("link")
		dir := m.skill(t, "real", name, validFiles(name))
		link := filepath.Join(m.mkdir(t, "links"), "other-name")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		m.chown(t, link)
		res := m.run(t, opts{}, "skill", "run", "--input", "{}", link)
		r := decodeResult(t, res)
		if res.code != 0 || !r.OK || r.Skill != name || string(r.Output) != `{"ran":true}` {
			t.Errorf("skill run through a symlinked folder\n%s", res)
		}
		if res := m.run(t, opts{}, "skill", "validate", link); res.code != 0 {
			t.Errorf("skill validate through a symlinked folder\n%s", res)
		}
		m.assertClean(t, nil, name)
	})
}

// TestSkillSpecialFilesInside: FIFOs and device nodes inside a skill
// folder, where skillrun itself reads nothing, neither block any verb nor
// work in the sandbox: /skill is bound nodev, so the device (here /dev/mem's
// numbers) cannot be opened, and the skill still runs. (Special files that
// skillrun must read are refused: TestHostileSkill.)
func TestSkillSpecialFilesInside(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		name := uniqueSkill("special")
		dir := m.skill(t, "skills", name, map[string]string{
			"SKILL.md": skillMD(name),
			"scripts/main.sh": "#!/bin/sh\n" +
				"if head -c 1 /skill/data/mem >/dev/null 2>&1; then mem=readable; else mem=denied; fi\n" +
				"if [ -p /skill/data/pipe ]; then pipe=fifo; else pipe=missing; fi\n" +
				"echo \"{\\\"mem\\\": \\\"$mem\\\", \\\"pipe\\\": \\\"$pipe\\\"}\"\n",
		})
		mkfifo("data/pipe")(t, m, dir)
		mkfifo("nested/deeper/pipe2")(t, m, dir)
		mknod("data/mem", 1)(t, m, dir)
		m.chownTree(t, dir)
		out := filepath.Join(m.dir, "bundle-out")
		for _, args := range [][]string{
			{"skill", "validate", dir},
			{"skill", "inspect", dir},
			{"skill", "list", filepath.Dir(dir)},
			{"skill", "bundle", "-o", out, dir},
		} {
			if res := m.run(t, opts{timeout: 20 * time.Second}, args...); res.code != 0 {
				t.Errorf("want exit 0\n%s", res)
			}
		}
		res := m.run(t, opts{timeout: 30 * time.Second}, "skill", "run", "--input", "{}", dir)
		r := decodeResult(t, res)
		if res.code != 0 || !strings.Contains(string(r.Output), `"mem":"denied"`) && !strings.Contains(string(r.Output), `"mem": "denied"`) {
			t.Errorf("the device node in the skill folder was readable in the sandbox, or the run failed\n%s", res)
		}
		os.RemoveAll(out)
		m.assertClean(t, nil, name)
	})
}

// TestHostileSkillInput: huge, malformed and wrong-typed input to skill
// run fails fast with exit 2 and a bounded-input error, without reading
// it all into memory, and leaves nothing behind.
func TestHostileSkillInput(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		calc := m.example("calculator")
		big := filepath.Join(m.dir, "big-input")
		f, err := os.Create(big)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(100 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m.chown(t, big)
		cases := []struct {
			name  string
			stdin func() *os.File
			args  []string
			want  []string
		}{
			{"100MiB stdin", func() *os.File { f, _ := os.Open(big); return f }, []string{calc}, []string{"input", "larger than"}},
			{"100MiB stdin as -", func() *os.File { f, _ := os.Open(big); return f }, []string{"--input-file", "-", calc}, []string{"input", "larger than"}},
			{"100MiB file", nil, []string{"--input-file", big, calc}, []string{"input", "larger than"}},
			{"input file missing", nil, []string{"--input-file", filepath.Join(m.dir, "nope"), calc}, []string{"--input-file"}},
			{"input file is a folder", nil, []string{"--input-file", m.dir, calc}, []string{"input"}},
			{"not an object", nil, []string{"--input", "[1, 2]", calc}, []string{"input", "object"}},
			{"null", nil, []string{"--input", "null", calc}, []string{"input", "null"}},
			{"truncated", nil, []string{"--input", `{"expression": "1+`, calc}, []string{"input", "JSON"}},
			{"trailing", nil, []string{"--input", `{"expression": "1"} {}`, calc}, []string{"input", "trailing"}},
			{"wrong type", nil, []string{"--input", `{"expression": 5}`, calc}, []string{"input", "expression"}},
			{"unknown property", nil, []string{"--input", `{"expression": "1", "x": 1}`, calc}, []string{"input"}},
			{"deeply nested", func() *os.File {
				return tempInput(t, m, `{"x": `+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`)
			}, []string{m.example("text-stats")}, []string{"input"}},
			{"invalid UTF-8", nil, []string{"--input", "{\"expression\": \"\xff\xfe\"}", calc}, []string{"input"}},
			{"flags after folder", nil, []string{calc, "--input", "{}"}, []string{"input", "expression"}},
			{"both inputs", nil, []string{"--input", "{}", "--input-file", big, calc}, []string{"--input"}},
			{"bad memory", nil, []string{"--memory", "1Q", "--input", "{}", calc}, []string{"--memory"}},
			{"bad timeout", nil, []string{"--timeout", "-1s", "--input", "{}", calc}, []string{"--timeout"}},
			{"bad pids", nil, []string{"--pids", "1", "--input", "{}", calc}, []string{"--pids"}},
			{"bad env", nil, []string{"--env", "=x", "--input", "{}", calc}, []string{"--env"}},
			{"workspace missing", nil, []string{"--workspace", filepath.Join(m.dir, "nope"), "--input", `{"expression": "1"}`, calc}, []string{"--workspace"}},
			{"bad format", nil, []string{"--format", "xml", "--input", "{}", calc}, []string{"--format"}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				o := opts{timeout: 30 * time.Second}
				if c.stdin != nil {
					f := c.stdin()
					defer f.Close()
					o.stdin = f
				}
				res := m.run(t, o, append([]string{"skill", "run"}, c.args...)...)
				wantError(t, res, 2, c.want...)
				if res.duration > 10*time.Second {
					t.Errorf("refusing the input took %s: must fail fast\n%s", res.duration, res)
				}
			})
		}
		// Raw NUL and binary bytes on stdin (arguments cannot hold NUL).
		res := m.run(t, opts{stdin: strings.NewReader("{\"expression\": \"1\x00\"}\x00\xff")}, "skill", "run", calc)
		wantError(t, res, 2, "input")
		// A policy refusal: exit 6, the reason in the JSON result.
		res = m.run(t, opts{}, "skill", "run", "--network", "bogus", "--input", `{"expression": "1"}`, calc)
		if res.code != 6 {
			t.Errorf("want exit 6 (policy)\n%s", res)
		} else if r := decodeResult(t, res); r.StoppedReason != "policy" || !strings.Contains(r.Error, "--network") || strings.Contains(r.Error, "\n") {
			t.Errorf("policy refusal must name --network on one line\n%s", res)
		}
		m.assertClean(t, nil)
	})
}

// tempInput writes data to a file and opens it (stdin for skillrun).
func tempInput(t *testing.T, m *mode, data string) *os.File {
	p := filepath.Join(m.dir, "input-"+uniqueSkill("f"))
	m.writeFile(t, p, []byte(data))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHostileSkillOutput: a skill writing binary, non-UTF-8, NUL and
// escape bytes to stdout and stderr: the result is still exactly one
// valid UTF-8 JSON document, and nothing is left behind.
func TestHostileSkillOutput(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		name := uniqueSkill("binout")
		dir := m.skill(t, "skills", name, map[string]string{
			"SKILL.md": skillMD(name),
			"scripts/main.sh": "#!/bin/sh\n" +
				"printf '\\377\\376\\000\\033[31mred\\033]0;title\\007\\n'\n" +
				"head -c 65536 /dev/urandom\n" +
				"printf '\\377err\\000\\033[2J' >&2\nhead -c 10000 /dev/urandom >&2\n",
		})
		res := m.run(t, opts{}, "skill", "run", "--input", "{}", dir)
		if res.code != 0 {
			t.Fatalf("want exit 0\n%s", res)
		}
		if !utf8.ValidString(res.stdout) || !json.Valid([]byte(res.stdout)) {
			t.Fatalf("result is not valid UTF-8 JSON\n%s", res)
		}
		r := decodeResult(t, res)
		var out string
		if err := json.Unmarshal(r.Output, &out); err != nil || !strings.HasPrefix(out, "\ufffd\ufffd\x00\x1b[31mred") {
			t.Errorf("binary output not kept as text (%v): %q", err, clip(out))
		}
		if !strings.Contains(r.Stderr, "\x1b[2J") && len(r.Stderr) == 0 {
			t.Errorf("stderr tail missing: %q", r.Stderr)
		}
		// --format text is for people, on a terminal: the skill's bytes
		// must not reach it raw (escape sequences can retitle, clear or
		// rewrite the operator's terminal, and fake skillrun's own lines).
		res = m.run(t, opts{}, "skill", "run", "--format", "text", "--input", "{}", dir)
		if res.code != 0 {
			t.Errorf("text result\n%s", res)
		}
		if !utf8.ValidString(res.stdout) || strings.ContainsFunc(res.stdout, func(r rune) bool {
			return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0
		}) {
			t.Errorf("--format text passes the skill's control bytes or invalid UTF-8 to the terminal\n%s", res)
		}
		m.assertClean(t, nil, name)
	})
}
