package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// writeSkill creates a skill folder named name under a temp dir with the
// given files (path -> content) and returns its path.
func writeSkill(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const okSkillMD = "---\nname: demo\ndescription: A demo skill.\n---\n# Demo\nbody text\n"

func TestLoadValid(t *testing.T) {
	dir := writeSkill(t, "demo", map[string]string{
		"SKILL.md":        "---\nname: demo\ndescription: A demo skill.\nlicense: MIT\ncompatibility: python3\nmetadata:\n  author: me\n  version: 1.0\nallowed-tools: Bash(git:*) Read\n---\n# Demo\nbody text\n",
		"scripts/main.py": "import sys\n",
	})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "demo" || s.Description != "A demo skill." || s.License != "MIT" || s.Compatibility != "python3" {
		t.Errorf("fields: %+v", s)
	}
	if !reflect.DeepEqual(s.Metadata, map[string]string{"author": "me", "version": "1.0"}) {
		t.Errorf("metadata = %v", s.Metadata)
	}
	if !reflect.DeepEqual(s.AllowedTools, []string{"Bash(git:*)", "Read"}) {
		t.Errorf("allowed-tools = %v", s.AllowedTools)
	}
	if s.Body != "# Demo\nbody text\n" {
		t.Errorf("body = %q", s.Body)
	}
	if s.Entry.Path != "scripts/main.py" || s.Entry.Kind != KindPython || s.Entry.Declared {
		t.Errorf("entry = %+v", s.Entry)
	}
	if s.Input.Source != SchemaDefault || string(s.Input.Schema) != `{"type":"object"}` || s.Input.Mode != InputStdin {
		t.Errorf("input = %+v", s.Input)
	}
}

func TestLoadErrors(t *testing.T) {
	long := strings.Repeat("a", 65)
	tests := []struct {
		name   string
		folder string
		files  map[string]string
		want   []string // every substring must appear
	}{
		{"no front matter", "demo", map[string]string{"SKILL.md": "# hi\n", "run.sh": "echo"}, []string{"SKILL.md: missing YAML front matter"}},
		{"unclosed", "demo", map[string]string{"SKILL.md": "---\nname: demo\n", "run.sh": "echo"}, []string{"not closed"}},
		{"bad yaml", "demo", map[string]string{"SKILL.md": "---\nname: [\n---\n", "run.sh": "echo"}, []string{"SKILL.md: front matter:"}},
		{"missing name and description", "demo", map[string]string{"SKILL.md": "---\nlicense: MIT\n---\n", "run.sh": "echo"},
			[]string{"SKILL.md: name: required", "SKILL.md: description: required"}},
		{"name rules", "Bad--Name-", map[string]string{"SKILL.md": "---\nname: Bad--Name-\ndescription: x\n---\n", "run.sh": "echo"},
			[]string{"SKILL.md: name:", "character 'B'", "start or end with a hyphen", "consecutive hyphens"}},
		{"name too long", long, map[string]string{"SKILL.md": "---\nname: " + long + "\ndescription: x\n---\n", "run.sh": "echo"}, []string{"65 characters, at most 64"}},
		{"metadata not strings", "demo", map[string]string{"SKILL.md": "---\nname: demo\ndescription: x\nmetadata:\n  a: [1]\n---\n", "run.sh": "echo"}, []string{"SKILL.md: metadata: a: line 5: value must be a string"}},
		{"metadata not a map", "demo", map[string]string{"SKILL.md": "---\nname: demo\ndescription: x\nmetadata: 3\n---\n", "run.sh": "echo"}, []string{"SKILL.md: metadata: line 4: must be a mapping"}},
		{"unknown manifest key", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "limits:\n  memroy: 1G\n"}, []string{`sandbox.yaml: line 2: limits.memroy: unknown key; the keys of limits are memory, cpus, pids, timeout, scratch, output (did you mean "memory"?)`}},
		{"bad manifest values", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "entry: ../x.py\nenv: [PATH, 9X]\nnetwork:\n  hosts: ['a b']\nfilesystem:\n  workspace: maybe\n  writable: [/usr/x, rel]\nlimits:\n  memory: 1Mi\n  pids: 1\n"},
			[]string{"sandbox.yaml: entry: \"../x.py\" leaves the skill folder", "sandbox.yaml: env: \"PATH\" is set by the sandbox", `sandbox.yaml: env: "9X" is not a valid`, `network.hosts: "a b"`, `filesystem.workspace: "maybe"`, `"/usr/x" is inside /usr`, `"rel" must be a clean absolute path`, "limits.memory:", "limits.pids:"}},
		{"bad size", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "limits:\n  memory: lots\n"}, []string{`sandbox.yaml: line 2: limits.memory: invalid size "lots"`}},
		{"declared entry missing", "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "entry: scripts/go.py\n"}, []string{`sandbox.yaml: entry: "scripts/go.py": no such file`}},
		{"unknown interpreter", "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "entry: tool\n", "tool": "#!/usr/bin/ruby\n"}, []string{`unsupported interpreter "/usr/bin/ruby"`}},
		{"no way to run", "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "entry: tool\n", "tool": "plain text\n"}, []string{"cannot tell how to run it"}},
		{"schema not json", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "input:\n  schema: s.json\n", "s.json": "{"}, []string{"s.json: not valid JSON"}},
		{"schema invalid", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "input:\n  schema: s.json\n", "s.json": `{"type": 5}`}, []string{"s.json: invalid JSON Schema"}},
		{"argv without argparse", "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "", "sandbox.yaml": "input:\n  mode: argv\n"}, []string{"input.mode: argv needs a schema inferred from argparse"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeSkill(t, tt.folder, tt.files)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestLoadWarnings: what the Agent Skills format allows but the
// specification's limits do not (and a convention that finds several
// entry points) loads, with a warning naming the file and field; an
// instruction-only skill is a skill without an entry point.
func TestLoadWarnings(t *testing.T) {
	tests := []struct {
		name, folder string
		files        map[string]string
		want         []string
		entry        string
	}{
		{"no entry", "demo", map[string]string{"SKILL.md": okSkillMD, "references/guide.md": "read me"}, nil, ""},
		{"two entries", "demo", map[string]string{"SKILL.md": okSkillMD, "scripts/main.py": "", "scripts/main.js": ""},
			[]string{"several conventional entry points found (scripts/main.py, scripts/main.js)"}, ""},
		{"name not folder", "demo", map[string]string{"SKILL.md": "---\nname: other\ndescription: x\n---\n", "run.sh": "echo"},
			[]string{`SKILL.md: name: "other" does not match the folder name "demo"`}, "run.sh"},
		{"description too long", "demo", map[string]string{"SKILL.md": "---\nname: demo\ndescription: " + strings.Repeat("d", 1025) + "\n---\n", "run.sh": "echo"},
			[]string{"SKILL.md: description: 1025 characters, at most 1024"}, "run.sh"},
		{"compatibility too long", "demo", map[string]string{"SKILL.md": "---\nname: demo\ndescription: x\ncompatibility: " + strings.Repeat("c", 501) + "\n---\n", "run.sh": "echo"},
			[]string{"SKILL.md: compatibility: 501 characters"}, "run.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Load(writeSkill(t, tt.folder, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Warnings) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", s.Warnings, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(s.Warnings[i], w) {
					t.Errorf("warning %q does not contain %q", s.Warnings[i], w)
				}
			}
			if s.Entry.Path != tt.entry || s.HasEntry() != (tt.entry != "") {
				t.Errorf("entry %+v, want %q", s.Entry, tt.entry)
			}
		})
	}
}

// TestNoEntryError: a skill without an entry point cannot be generated
// without a command; the error names sandbox.yaml only when it exists.
func TestNoEntryError(t *testing.T) {
	bare, err := Load(writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Generate(bare, "linux", WithHostLayout(testLayout), WithHostID(1000, 1000))
	if !errors.Is(err, ErrNoEntry) || strings.Contains(err.Error(), "sandbox.yaml:") || !strings.Contains(err.Error(), "skill exec") {
		t.Errorf("no manifest: %v", err)
	}
	if _, err := Generate(bare, "linux", WithHostLayout(testLayout), WithHostID(1000, 1000), WithCommand([]string{"sh"}, nil)); err != nil {
		t.Errorf("with a command: %v", err)
	}
	withManifest, err := Load(writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "limits:\n  pids: 10\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := withManifest.NoEntryError(); !strings.HasPrefix(err.Error(), "sandbox.yaml: entry: no entry point") {
		t.Errorf("with a manifest: %v", err)
	}
}

func TestLoadNotAFolder(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("Load of a missing folder succeeded")
	}
	dir := writeSkill(t, "demo", map[string]string{"x": ""})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "no SKILL.md") {
		t.Fatalf("err = %v", err)
	}
}

func TestEntryClassification(t *testing.T) {
	tests := []struct {
		file, content, kind string
		interp              []string
	}{
		{"scripts/main.py", "print(1)", KindPython, pythonCmd},
		{"scripts/main.js", "", KindNode, []string{"node"}},
		{"scripts/main.mjs", "", KindNode, []string{"node"}},
		{"scripts/main.sh", "echo", KindShell, []string{"sh"}},
		{"scripts/main.sh", "#!/bin/bash\necho", KindShell, []string{"bash"}},
		{"scripts/main", "#!/usr/bin/env python3\n", KindPython, append([]string{"python3"}, pythonCmd[1:]...)},
		{"scripts/main", "#!/usr/bin/env -S node --no-warnings\n", KindNode, []string{"node", "--no-warnings"}},
		{"scripts/run", "#!/bin/sh -e\n", KindShell, []string{"/bin/sh", "-e"}},
	}
	for _, tt := range tests {
		t.Run(tt.file+" "+tt.content, func(t *testing.T) {
			dir := writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, tt.file: tt.content})
			s, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if s.Entry.Kind != tt.kind || !reflect.DeepEqual(s.Entry.Interpreter, tt.interp) {
				t.Errorf("entry = %+v, want %s %v", s.Entry, tt.kind, tt.interp)
			}
		})
	}
	// An ELF file runs directly when executable.
	dir := writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "entry: bin/tool\n", "bin/tool": "\x7fELF\x02\x01\x01"})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "without execute permission") {
		t.Fatalf("non-executable ELF: err = %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entry.Kind != KindNative || len(s.Entry.Interpreter) != 0 || !s.Entry.Declared {
		t.Errorf("entry = %+v", s.Entry)
	}
}

func TestEntryOutsideFolder(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "evil.py")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "sandbox.yaml": "entry: link.py\n"})
	if err := os.Symlink(outside, filepath.Join(dir, "link.py")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "resolves outside the skill folder") {
		t.Fatalf("err = %v", err)
	}
}

const argparseSrc = `
import argparse
p = argparse.ArgumentParser()
p.add_argument("path", help="file to read")
p.add_argument("-n", "--max-words", type=int, default=10, help='limit, "quoted"')
p.add_argument("--ratio", type=float, required=True)
p.add_argument("--verbose", action="store_true")
p.add_argument("--tag", action="append")
p.add_argument("--mode", choices=["fast", "slow"], default="fast")
p.add_argument("--files", nargs="+")
p.add_argument("--out", dest="output_file")
p.add_argument("--version", action="version", version="1")
`

func TestArgparseSkillInputAndArgv(t *testing.T) {
	dir := writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "scripts/main.py": argparseSrc})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Input.Source != SchemaArgparse || s.Input.Mode != InputArgv {
		t.Fatalf("input = %+v", s.Input)
	}
	obj, err := s.ValidateInput([]byte(`{"path": "-x.txt", "ratio": 0.5, "verbose": true, "tag": ["a", "b"], "max_words": 3, "mode": "slow"}`))
	if err != nil {
		t.Fatal(err)
	}
	argv, err := s.Argv(obj)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--max-words=3", "--ratio=0.5", "--verbose", "--tag", "a", "b", "--mode=slow", "--", "-x.txt"}
	if !reflect.DeepEqual(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
	for in, msg := range map[string]string{
		`{"ratio": 1}`:                              `missing properties: ["path"]`,
		`{"path": "p", "ratio": "x"}`:               `/properties/ratio: type: x has type "string", want "number"`,
		`{"path": "p", "ratio": 1, "mode": "warp"}`: "/mode:",
		`{"path": "p", "ratio": 1, "bogus": 1}`:     "bogus",
		`[1]`:                                       "input: must be a JSON object",
		`{"path": `:                                 "input: not valid JSON",
		`{} {}`:                                     "trailing data",
		`null`:                                      "not null",
	} {
		if _, err := s.ValidateInput([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ValidateInput(%s) = %v, want %q", in, err, msg)
		}
	}
}

func TestValidateInputDefaultSchema(t *testing.T) {
	s := &Skill{Input: Input{Schema: defaultSchema, Source: SchemaDefault, Mode: InputStdin}}
	if obj, err := s.ValidateInput(nil); err != nil || len(obj) != 0 {
		t.Errorf("empty input: %v %v", obj, err)
	}
	if _, err := s.ValidateInput([]byte(`"str"`)); err == nil {
		t.Error("a string was accepted as input")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"65536": 65536, "1k": 1024, "512Mi": 512 << 20, "1G": 1 << 30, "2GiB": 2 << 30, "3MB": 3 << 20} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1.5G", "-1", "1Q", "99999999999G"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", in)
		}
	}
}

// testLayout is a fixed host layout so golden files do not depend on the
// machine.
var testLayout = HostLayout{
	Dirs:       []string{"/usr"},
	Symlinks:   map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"},
	Etc:        []string{"/etc/ld.so.cache"},
	EtcDirs:    []string{"/etc/alternatives"},
	NetworkEtc: []string{"/etc/resolv.conf", "/etc/ssl"},
}

func loadExample(t *testing.T, name string) *Skill {
	t.Helper()
	s, err := Load(filepath.Join("..", "examples", "skills", name))
	if err != nil {
		t.Fatal(err)
	}
	// Golden files must not depend on where the repository is checked out.
	s.Dir = "/skills/" + name
	return s
}

func golden(t *testing.T, name string, sp *specs.Spec) {
	t.Helper()
	got, err := json.MarshalIndent(sp, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./spec -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the generated spec (run go test ./spec -update after checking the change):\n%s", path, firstDiff(string(want), string(got)))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return "line " + itoa(i+1) + ":\n- " + al[i] + "\n+ " + bl[i]
		}
	}
	return "lengths differ"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestGenerateGolden(t *testing.T) {
	base := []Option{WithHostLayout(testLayout), WithArch("amd64"), WithHostID(1000, 1000)}
	tests := []struct {
		golden, skill, platform string
		opts                    []Option
	}{
		{"calculator.linux.json", "calculator", "linux", nil},
		{"csv-summary.linux.json", "csv-summary", "linux", []Option{WithArgs("--data=a,b"), WithGrants(Grants{Memory: 256 << 20}), WithGrants(Grants{CPUs: 0.5}), WithGrants(Grants{Pids: 10})}},
		{"save-note.linux.json", "save-note", "linux", []Option{WithGrants(Grants{Workspace: "/home/u/ws"}), WithGrants(Grants{Env: map[string]string{"NOTE_TAG": "x"}}), WithBundleDir("/run/b")}},
		{"fetch-url.linux.json", "fetch-url", "linux", []Option{WithGrants(Grants{Network: NetworkHost})}},
		{"fetch-url.allow.linux.json", "fetch-url", "linux", []Option{WithGrants(Grants{Network: NetworkAllow}), WithGrants(Grants{Resolve: []string{"api.github.com:443:127.0.0.1"}})}},
		{"calculator.darwin.json", "calculator", "darwin", []Option{WithBundleDir("/private/tmp/b")}},
		{"save-note.darwin.json", "save-note", "darwin", []Option{WithGrants(Grants{Workspace: "/Users/u/ws"}), WithBundleDir("/private/tmp/b")}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			sp, err := Generate(loadExample(t, tt.skill), tt.platform, append(append([]Option(nil), base...), tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(sp); err != nil {
				t.Errorf("Validate: %v", err)
			}
			golden(t, tt.golden, sp)
		})
	}
}

func TestGenerateLinuxProfile(t *testing.T) {
	s := loadExample(t, "calculator")
	sp, err := Generate(s, "linux", WithHostLayout(testLayout), WithArch("amd64"), WithHostID(1000, 1001), WithGrants(Grants{Timeout: 3 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	p := sp.Process
	if !sp.Root.Readonly || !p.NoNewPrivileges || p.Terminal || p.Cwd != "/tmp" {
		t.Errorf("root/process: %+v %+v", sp.Root, p)
	}
	if c := p.Capabilities; c == nil || len(c.Bounding)+len(c.Effective)+len(c.Permitted)+len(c.Inheritable)+len(c.Ambient) != 0 {
		t.Errorf("capabilities = %+v", c)
	}
	env := strings.Join(p.Env, " ")
	if env != "PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 SKILL_DIR=/skill" {
		t.Errorf("env = %s", env)
	}
	if got := strings.Join(p.Args, " "); got != "python3 -B -s -E /skill/scripts/main.py" {
		t.Errorf("args = %s", got)
	}
	ns := map[specs.LinuxNamespaceType]bool{}
	for _, n := range sp.Linux.Namespaces {
		ns[n.Type] = true
	}
	for _, n := range []specs.LinuxNamespaceType{"user", "mount", "pid", "ipc", "uts", "network", "cgroup"} {
		if !ns[n] {
			t.Errorf("namespace %s missing", n)
		}
	}
	if m := sp.Linux.UIDMappings; len(m) != 1 || m[0] != (specs.LinuxIDMapping{ContainerID: 0, HostID: 1000, Size: 1}) {
		t.Errorf("uid mappings = %+v", m)
	}
	if m := sp.Linux.GIDMappings; len(m) != 1 || m[0].HostID != 1001 {
		t.Errorf("gid mappings = %+v", m)
	}
	r := sp.Linux.Resources
	if *r.Memory.Limit != 64<<20 || *r.Memory.Swap != 64<<20 || *r.Pids.Limit != 16 || *r.CPU.Quota != 100000 {
		t.Errorf("resources = %+v %+v %+v", r.Memory, r.Pids, r.CPU)
	}
	if sp.Annotations[AnnotationTimeout] != "3000" {
		t.Errorf("timeout annotation = %q (operator override must win over the manifest's 5s)", sp.Annotations[AnnotationTimeout])
	}
	for _, m := range sp.Mounts {
		if m.Destination == "/skill" && !contains(m.Options, "ro") {
			t.Errorf("/skill not read-only: %v", m.Options)
		}
		if m.Destination == "/tmp" && !contains(m.Options, "size=67108864") {
			t.Errorf("/tmp not size-limited: %v", m.Options)
		}
		hostEtcDir := m.Destination == "/etc/alternatives" && m.Source == "/etc/alternatives" && contains(m.Options, "ro")
		// /etc is a folder of the read-only root, generated: no mount.
		if m.Source == "/etc" || m.Destination == "/etc" || (strings.HasPrefix(m.Destination, "/etc/") && !hostEtcDir) || m.Destination == "/sys" || m.Destination == "/home" {
			t.Errorf("unexpected mount %+v", m)
		}
	}
	denied := map[string]bool{}
	for _, sc := range sp.Linux.Seccomp.Syscalls {
		if len(sc.Args) == 0 && sc.Action == specs.ActErrno {
			for _, n := range sc.Names {
				denied[n] = true
			}
		}
	}
	for _, n := range []string{"unshare", "setns", "mount", "ptrace", "bpf", "keyctl", "init_module", "io_uring_setup", "userfaultfd", "perf_event_open", "kexec_load", "open_by_handle_at", "clone3"} {
		if !denied[n] {
			t.Errorf("seccomp does not deny %s", n)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestGeneratePolicy(t *testing.T) {
	base := []Option{WithHostLayout(testLayout), WithHostID(1000, 1000)}
	fetch := loadExample(t, "fetch-url")
	_, err := Generate(fetch, "linux", base...)
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Field != "network" || !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "example.com:443") {
		t.Errorf("undeclared network: err = %v", err)
	}
	if _, err := Generate(fetch, "linux", append(base, WithGrants(Grants{Network: "example.com"}))...); !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "is not one of none, allow, host") {
		t.Errorf("host list: err = %v", err)
	}
	sp, err := Generate(fetch, "linux", append(base, WithGrants(Grants{Network: NetworkHost}))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range sp.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace {
			t.Error("network namespace kept with --network=host")
		}
	}
	if sp.Annotations[AnnotationNetwork] != NetworkHost {
		t.Error("network annotation not host")
	}
	note := loadExample(t, "save-note")
	if _, err := Generate(note, "linux", base...); !errors.As(err, &pe) || pe.Field != "filesystem.workspace" {
		t.Errorf("missing workspace: err = %v", err)
	}
	calc := loadExample(t, "calculator")
	if _, err := Generate(calc, "linux", WithHostLayout(testLayout)); err == nil {
		t.Error("linux spec without host ID")
	}
	if _, err := Generate(calc, "linux", WithHostLayout(testLayout), WithHostID(0, 0)); err == nil || !strings.Contains(err.Error(), "host uid or gid 0") {
		t.Errorf("host root mapping: err = %v", err)
	}
	if _, err := Generate(calc, "plan9", base...); err == nil {
		t.Error("unknown platform accepted")
	}
	if _, err := Generate(calc, "linux", append(base, WithGrants(Grants{Env: map[string]string{"PATH": "/evil"}}))...); err == nil {
		t.Error("PATH override accepted")
	}
	p, err := Resolve(calc, WithGrants(Grants{Env: map[string]string{"UNDECLARED": "1"}}))
	if err != nil || len(p.Warnings) != 1 || p.Env["UNDECLARED"] != "1" {
		t.Errorf("undeclared env: %+v %v", p, err)
	}
	if _, err := Resolve(calc, WithGrants(Grants{Memory: 1 << 20})); err == nil {
		t.Error("1 MiB memory accepted")
	}
}

func TestGenerateDarwin(t *testing.T) {
	s := loadExample(t, "calculator")
	if _, err := Generate(s, "darwin"); err == nil {
		t.Error("darwin spec without bundle dir")
	}
	sp, err := Generate(s, "darwin", WithBundleDir("/private/tmp/b"))
	if err != nil {
		t.Fatal(err)
	}
	if sp.Linux != nil {
		t.Error("darwin spec has a linux section")
	}
	if sp.Process.Args[len(sp.Process.Args)-1] != "/skills/calculator/scripts/main.py" {
		t.Errorf("args = %v (Seatbelt cannot remap paths: host path expected)", sp.Process.Args)
	}
	if sp.Process.Cwd != "/private/tmp/b/scratch" {
		t.Errorf("cwd = %s", sp.Process.Cwd)
	}
	var rw []string
	for _, m := range sp.Mounts {
		if contains(m.Options, "rw") {
			rw = append(rw, m.Source)
		}
		if m.Source != m.Destination {
			t.Errorf("darwin mount %+v is not an identity mount", m)
		}
	}
	if !reflect.DeepEqual(rw, []string{"/private/tmp/b/scratch"}) {
		t.Errorf("writable = %v", rw)
	}
	if err := Validate(sp); err != nil {
		t.Error(err)
	}
}

func TestValidateRejects(t *testing.T) {
	sp, err := Generate(loadExample(t, "calculator"), "linux", WithHostLayout(testLayout), WithHostID(1000, 1000))
	if err != nil {
		t.Fatal(err)
	}
	sp.Root.Readonly = false
	sp.Process.NoNewPrivileges = false
	sp.Process.Capabilities.Bounding = []string{"CAP_SYS_ADMIN"}
	sp.Process.Env = append(sp.Process.Env, "NOEQUALS")
	sp.Linux.UIDMappings[0].HostID = 0
	sp.Linux.Namespaces = sp.Linux.Namespaces[:2]
	sp.Linux.Seccomp = nil
	sp.Mounts = append(sp.Mounts, specs.Mount{Destination: "/x", Type: "bind", Source: "/", Options: []string{"rbind"}}, specs.Mount{Destination: "rel"})
	err = Validate(sp)
	for _, w := range []string{"root.readonly", "process.noNewPrivileges", "process.capabilities.bounding", "process.env[", "linux.uidMappings: must not map to host ID 0", "mount namespace is missing", "network namespace is missing", "linux.seccomp", "the host root must not be bound", `"rel" must be absolute`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Validate error %v\ndoes not mention %q", err, w)
		}
	}
}

func TestWriteBundle(t *testing.T) {
	s := loadExample(t, "calculator")
	s.Dir, _ = filepath.Abs(filepath.Join("..", "examples", "skills", "calculator"))
	dir := filepath.Join(t.TempDir(), "bundle")
	sp, err := Generate(s, "linux", WithHostLayout(testLayout), WithHostID(1000, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteBundle(dir, sp); err != nil {
		t.Fatal(err)
	}
	var back specs.Spec
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Process.Args, sp.Process.Args) {
		t.Error("config.json does not round-trip")
	}
	etc := filepath.Join(dir, "rootfs", "etc")
	passwd, _ := os.ReadFile(filepath.Join(etc, "passwd"))
	if string(passwd) != "skill:x:0:0:skill sandbox user:/tmp:/usr/sbin/nologin\n" {
		t.Errorf("passwd = %q", passwd)
	}
	hosts, _ := os.ReadFile(filepath.Join(etc, "hosts"))
	if strings.Count(string(hosts), "\n") != 2 || !strings.Contains(string(hosts), "localhost") {
		t.Errorf("hosts = %q", hosts)
	}
	if _, err := os.Stat(filepath.Join(etc, "resolv.conf")); err == nil {
		t.Error("resolv.conf written without network")
	}
	if l, err := os.Readlink(filepath.Join(dir, "rootfs", "bin")); err != nil || l != "usr/bin" {
		t.Errorf("rootfs/bin = %q %v", l, err)
	}
	if strings.Contains(sp.Annotations[AnnotationEtcCopy], "resolv.conf") {
		t.Error("resolv.conf copied without network")
	}
	// The host entries the layout names are copied into ROOTFS/etc, the
	// sandbox's /etc (a folder of the read-only root, no mount).
	if want, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		if got, err := os.ReadFile(filepath.Join(etc, "ld.so.cache")); err != nil || !bytes.Equal(got, want) {
			t.Errorf("etc/ld.so.cache not copied: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "etc")); err == nil {
		t.Error("a bundle-level etc/ folder was written; /etc lives in rootfs")
	}
	// Host folders under /etc are bound, with their mount point in the
	// rootfs's etc.
	if fi, err := os.Stat(filepath.Join(etc, "alternatives")); err != nil || !fi.IsDir() {
		t.Errorf("mount point etc/alternatives in the rootfs's etc: %v", err)
	}
	for p, dirWant := range map[string]bool{"usr": true, "skill": true, "tmp": true, "proc": true, "etc": true} {
		fi, err := os.Stat(filepath.Join(dir, "rootfs", p))
		if err != nil {
			t.Errorf("mount point %s: %v", p, err)
			continue
		}
		if fi.IsDir() != dirWant {
			t.Errorf("mount point %s: dir=%v", p, fi.IsDir())
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "rootfs", "tmp")); fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("rootfs/tmp mode = %v, want sticky 0777 like the tmpfs", fi.Mode())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("bundle mode = %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs", "dev", "pts")); err == nil {
		t.Error("nested mount point dev/pts created")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".config.json.tmp*"))
	if len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
	// Rewriting over an existing bundle works (idempotent).
	if err := WriteBundle(dir, sp); err != nil {
		t.Errorf("second WriteBundle: %v", err)
	}
}

// The host's boot id is not namespaced and identifies the host: the
// profile masks it (found by tests/security, probe secrets/machine-id).
func TestGenerateLinuxMasksHostIdentity(t *testing.T) {
	s := loadExample(t, "calculator")
	sp, err := Generate(s, "linux", WithHostLayout(testLayout), WithArch("amd64"), WithHostID(1000, 1001))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/proc/sys/kernel/random/boot_id", "/proc/kcore", "/proc/keys"} {
		if !contains(sp.Linux.MaskedPaths, p) {
			t.Errorf("%s is not masked: %v", p, sp.Linux.MaskedPaths)
		}
	}
}

// TestGenerateSkillInRootfs: a skill copied to BundleSkillDir is part of
// the read-only root (no /skill mount); a skill elsewhere is bound.
func TestGenerateSkillInRootfs(t *testing.T) {
	s := loadExample(t, "calculator")
	bundle := t.TempDir()
	hasSkillMount := func(sp *specs.Spec) bool {
		for _, m := range sp.Mounts {
			if m.Destination == SkillMount {
				return true
			}
		}
		return false
	}
	sp, err := Generate(s, "linux", WithHostLayout(testLayout), WithHostID(1000, 1000), WithBundleDir(bundle))
	if err != nil {
		t.Fatal(err)
	}
	if !hasSkillMount(sp) {
		t.Errorf("a skill outside the bundle (%s) is not bound at %s", s.Dir, SkillMount)
	}
	c := *s
	c.Dir = BundleSkillDir(bundle)
	sp, err = Generate(&c, "linux", WithHostLayout(testLayout), WithHostID(1000, 1000), WithBundleDir(bundle))
	if err != nil {
		t.Fatal(err)
	}
	if hasSkillMount(sp) {
		t.Errorf("a skill copied into the rootfs (%s) is still bound at %s", c.Dir, SkillMount)
	}
	if !sp.Root.Readonly {
		t.Error("the root holding the skill is not read-only")
	}
}

func rlimitMap(sp *specs.Spec) map[string][2]uint64 {
	m := map[string][2]uint64{}
	for _, r := range sp.Process.Rlimits {
		m[r.Type] = [2]uint64{r.Soft, r.Hard}
	}
	return m
}

func TestGenerateRlimitFallback(t *testing.T) {
	s := loadExample(t, "calculator")
	base := []Option{WithHostLayout(testLayout), WithArch("amd64"), WithHostID(1000, 1000), WithGrants(Grants{Memory: 64 << 20}), WithGrants(Grants{Pids: 32}), WithGrants(Grants{Timeout: 2500 * time.Millisecond}), WithGrants(Grants{CPUs: 2})}
	sp, err := Generate(s, "linux", base...)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NPROC", "RLIMIT_CPU"} {
		if _, ok := rlimitMap(sp)[k]; ok {
			t.Errorf("%s set without the fallback", k)
		}
	}
	sp, err = Generate(s, "linux", append(base, WithRlimitFallback(true))...)
	if err != nil {
		t.Fatal(err)
	}
	got := rlimitMap(sp)
	want := map[string][2]uint64{"RLIMIT_AS": {64 << 20, 64 << 20}, "RLIMIT_DATA": {64 << 20, 64 << 20}, "RLIMIT_NPROC": {32, 32}, "RLIMIT_CPU": {6, 7}, "RLIMIT_NOFILE": {DefaultNoFile, DefaultNoFile}}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if err := Validate(sp); err != nil {
		t.Errorf("the fallback spec breaks the profile: %v", err)
	}
	p, err := Resolve(s, append(base, WithRlimitFallback(false))...)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fallback == nil || p.Fallback.Memory != EnforcedByRlimitAS || p.Fallback.Pids != EnforcedByNone || p.Fallback.CPUTimeSeconds != 6 {
		t.Errorf("fallback without per-userns RLIMIT_NPROC = %+v", p.Fallback)
	}
	sp, _ = Generate(s, "linux", append(base, WithRlimitFallback(false))...)
	if _, ok := rlimitMap(sp)["RLIMIT_NPROC"]; ok {
		t.Error("RLIMIT_NPROC set where the kernel counts it per host user")
	}
	// Node.js reserves gigabytes of address space: RLIMIT_DATA only.
	node := *s
	node.Entry.Kind = KindNode
	p, _ = Resolve(&node, append(base, WithRlimitFallback(true))...)
	if p.Fallback.Memory != EnforcedByRlimitData {
		t.Errorf("node: memory enforced by %s, want rlimit_data", p.Fallback.Memory)
	}
	// darwin specs never get the Linux fallback.
	sp, err = Generate(s, "darwin", append(base, WithRlimitFallback(true), WithBundleDir("/b"))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rlimitMap(sp)["RLIMIT_AS"]; ok {
		t.Error("darwin spec got the Linux rlimit fallback")
	}
	// With prlimit(1), the limits are its arguments, not process.rlimits
	// (which the runtime would apply to its own Go init too).
	sp, err = Generate(s, "linux", append(base, WithRlimitFallback(true), WithRlimitWrapper("/usr/bin/prlimit"))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NPROC", "RLIMIT_CPU"} {
		if _, ok := rlimitMap(sp)[k]; ok {
			t.Errorf("%s in process.rlimits with the prlimit wrapper", k)
		}
	}
	plain, _ := Generate(s, "linux", append(base, WithRlimitFallback(true))...)
	wantArgs := "/usr/bin/prlimit --data=67108864:67108864 --as=67108864:67108864 --nproc=32:32 --cpu=6:7 -- " + strings.Join(plain.Process.Args, " ")
	if got := strings.Join(sp.Process.Args, " "); got != wantArgs {
		t.Errorf("args = %q, want %q", got, wantArgs)
	}
}
