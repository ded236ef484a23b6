package spec

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadWithin runs Load with a deadline: a hostile skill folder must never
// make it block.
func loadWithin(t *testing.T, dir string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Load(dir)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Load(%s) blocked for 10s", dir)
		return nil
	}
}

func assertOneLineError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Load succeeded, want an error containing %q", want)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "SKILL.md: ") && !strings.HasPrefix(line, "sandbox.yaml: ") && !strings.HasPrefix(line, "skill folder ") && !strings.Contains(line, ": ") {
			t.Errorf("error line %q does not name a file", line)
		}
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// TestLoadSpecialFiles: FIFOs and devices where Load reads a file are
// refused at once, naming the file (a FIFO used to block Load forever).
func TestLoadSpecialFiles(t *testing.T) {
	for _, name := range []string{"SKILL.md", "sandbox.yaml", "schema.json", "scripts/main.sh"} {
		t.Run("fifo "+name, func(t *testing.T) {
			files := map[string]string{"SKILL.md": okSkillMD, "scripts/main.sh": "echo {}\n", "schema.json": `{"type":"object"}`}
			if name == "schema.json" || name == "scripts/main.sh" {
				files["sandbox.yaml"] = "entry: scripts/main.sh\ninput:\n  schema: schema.json\n"
			}
			delete(files, name)
			dir := writeSkill(t, "demo", files)
			os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
			err := loadWithin(t, dir)
			assertOneLineError(t, err, name, "FIFO")
		})
	}
	t.Run("char device SKILL.md", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mknod needs root")
		}
		dir := writeSkill(t, "demo", map[string]string{"scripts/main.sh": "echo {}\n"})
		// /dev/zero's numbers: reading it would never end.
		if err := syscall.Mknod(filepath.Join(dir, "SKILL.md"), syscall.S_IFCHR|0o644, int(1<<8|5)); err != nil {
			t.Skipf("mknod: %v", err)
		}
		assertOneLineError(t, loadWithin(t, dir), "SKILL.md", "character device")
	})
}

// TestLoadBounded: oversized files are refused by size before parsing.
func TestLoadBounded(t *testing.T) {
	big := "---\nname: demo\ndescription: d\nx: " + strings.Repeat("a", MaxSkillMDSize) + "\n---\n"
	dir := writeSkill(t, "demo", map[string]string{"SKILL.md": big, "scripts/main.sh": "echo\n"})
	assertOneLineError(t, loadWithin(t, dir), "SKILL.md: ", "limit")
	dir = writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "scripts/main.sh": "echo\n",
		"sandbox.yaml": "# " + strings.Repeat("x", MaxManifestSize) + "\n"})
	assertOneLineError(t, loadWithin(t, dir), "sandbox.yaml: ", "limit")
}

// TestLoadOutsideLinks: SKILL.md, sandbox.yaml and the schema must not be
// symlinks out of the folder (skillrun, maybe as root, would quote them).
func TestLoadOutsideLinks(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("limits: {memory: TOPSECRET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"SKILL.md", "sandbox.yaml", "schema.json"} {
		files := map[string]string{"SKILL.md": okSkillMD, "scripts/main.sh": "echo\n", "sandbox.yaml": "input:\n  schema: schema.json\n"}
		delete(files, name)
		dir := writeSkill(t, "demo", files)
		if err := os.Symlink(secret, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		err := loadWithin(t, dir)
		assertOneLineError(t, err, name, "outside the skill folder")
		if strings.Contains(err.Error(), "TOPSECRET") {
			t.Errorf("%s: error quotes the host file: %v", name, err)
		}
	}
}

// TestYAMLErrorsOneLine: type errors name the line and key, on one line.
func TestYAMLErrorsOneLine(t *testing.T) {
	tests := []struct {
		file, content string
		want          []string
	}{
		{"SKILL.md", "---\nname: [demo]\ndescription: {a: 1}\n---\n", []string{"SKILL.md: front matter: line 2: name: cannot unmarshal", "line 3: description: "}},
		{"SKILL.md", "---\nname: demo\ndescription: d\nmetadata:\n  \"a\\nb\": [1]\n---\n", []string{`SKILL.md: metadata: "a\nb": line 5`}},
		{"sandbox.yaml", "limits:\n  memory: [1]\n  cpus: abc\n  timeout: {a: 1}\n  scratch: 1Q\nargs: 5\n", []string{
			"sandbox.yaml: line 2: limits.memory: must be a size", "line 3: limits.cpus: cannot unmarshal", "line 4: limits.timeout: must be a duration",
			`line 5: limits.scratch: invalid size "1Q"`, "line 6: args: cannot unmarshal"}},
	}
	for _, tt := range tests {
		files := map[string]string{"SKILL.md": okSkillMD, "scripts/main.sh": "echo\n"}
		files[tt.file] = tt.content
		err := loadWithin(t, writeSkill(t, "demo", files))
		if err != nil && strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("multi-line error: %q", err)
		}
		assertOneLineError(t, err, tt.want...)
	}
}

// TestValidateInputUTF8: input that is not UTF-8 is refused; before, the
// schema checked the U+FFFD-replaced document while the skill got the raw
// bytes.
func TestValidateInputUTF8(t *testing.T) {
	dir := writeSkill(t, "demo", map[string]string{"SKILL.md": okSkillMD, "run.sh": "echo\n", "sandbox.yaml": "input:\n  schema: s.json\n",
		"s.json": `{"type":"object","properties":{"a":{"type":"string","maxLength":1}}}`})
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"{\"a\": \"\xff\"}", "{\"a\": \"x\"}\xfe"} {
		if _, err := s.ValidateInput([]byte(in)); err == nil || !strings.Contains(err.Error(), "input: not valid UTF-8") {
			t.Errorf("ValidateInput(%q) = %v, want a UTF-8 error", in, err)
		}
	}
	if _, err := s.ValidateInput([]byte(`{"a": "é"}`)); err != nil {
		t.Errorf("valid UTF-8 refused: %v", err)
	}
}
