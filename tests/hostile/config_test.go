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
)

// configCase is a hostile config.json: prepare writes it into the bundle
// folder (which has a valid busybox rootfs), want are substrings the one
// error line must contain.
type configCase struct {
	name    string
	prepare func(t *testing.T, m *mode, dir string, valid map[string]any)
	want    []string
}

// notBundle are the cases where the folder has no regular config.json, so
// `run DIR` takes DIR for a container ID (documented: a directory holding
// config.json is a bundle) and must refuse it as an invalid ID naming the
// argument.
var notBundle = map[string]bool{"missing": true, "folder": true, "fifo": true, "char device": true}

func rawConfig(data string) func(t *testing.T, m *mode, dir string, _ map[string]any) {
	return func(t *testing.T, m *mode, dir string, _ map[string]any) {
		m.writeFile(t, filepath.Join(dir, "config.json"), []byte(data))
	}
}

// editConfig changes the valid config (a JSON object) with edit.
func editConfig(edit func(s map[string]any)) func(t *testing.T, m *mode, dir string, valid map[string]any) {
	return func(t *testing.T, m *mode, dir string, valid map[string]any) {
		edit(valid)
		data, err := json.Marshal(valid)
		if err != nil {
			t.Fatal(err)
		}
		m.writeFile(t, filepath.Join(dir, "config.json"), data)
	}
}

func process(s map[string]any) map[string]any { return s["process"].(map[string]any) }

func configCases() []configCase {
	garbage := make([]byte, 4096)
	rand.New(rand.NewSource(4)).Read(garbage)
	return []configCase{
		{"empty", rawConfig(""), []string{"config.json", "unexpected end of input"}},
		{"truncated", func(t *testing.T, m *mode, dir string, valid map[string]any) {
			data, _ := json.Marshal(valid)
			m.writeFile(t, filepath.Join(dir, "config.json"), data[:len(data)/2])
		}, []string{"config.json", "truncated"}},
		{"null", rawConfig("null"), []string{"config.json", "null"}},
		{"array", rawConfig("[1, 2]"), []string{"config.json", "invalid JSON"}},
		{"string", rawConfig(`"config"`), []string{"config.json", "invalid JSON"}},
		{"binary garbage", rawConfig(string(garbage)), []string{"config.json", "invalid JSON"}},
		{"trailing data", func(t *testing.T, m *mode, dir string, valid map[string]any) {
			data, _ := json.Marshal(valid)
			m.writeFile(t, filepath.Join(dir, "config.json"), append(data, "{}"...))
		}, []string{"config.json", "trailing data"}},
		{"deeply nested", rawConfig(`{"annotations": {"x": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}`),
			[]string{"config.json", "depth"}},
		{"huge 64MiB", func(t *testing.T, m *mode, dir string, valid map[string]any) {
			valid["annotations"] = map[string]string{"x": strings.Repeat("a", 64<<20)}
			data, _ := json.Marshal(valid)
			m.writeFile(t, filepath.Join(dir, "config.json"), data)
		}, []string{"config.json", "larger than"}},
		{"root wrong type", editConfig(func(s map[string]any) { s["root"] = 5 }), []string{"config.json", "root"}},
		{"args wrong type", editConfig(func(s map[string]any) { process(s)["args"] = "sh" }), []string{"config.json", "process.args"}},
		{"uid negative", editConfig(func(s map[string]any) { process(s)["user"] = map[string]any{"uid": -1, "gid": 0} }), []string{"config.json", "process.user.uid"}},
		{"ociVersion number", editConfig(func(s map[string]any) { s["ociVersion"] = 1.2 }), []string{"config.json", "ociVersion"}},
		{"mounts object", editConfig(func(s map[string]any) { s["mounts"] = map[string]any{"a": 1} }), []string{"config.json", "mounts"}},
		{"no root", editConfig(func(s map[string]any) { delete(s, "root") }), []string{"root.path"}},
		{"no process", editConfig(func(s map[string]any) { delete(s, "process") }), []string{"process"}},
		{"no args", editConfig(func(s map[string]any) { process(s)["args"] = []string{} }), []string{"process.args"}},
		{"relative cwd", editConfig(func(s map[string]any) { process(s)["cwd"] = "tmp" }), []string{"process.cwd"}},
		{"no linux section", editConfig(func(s map[string]any) { delete(s, "linux") }), []string{"linux"}},
		{"unknown namespace", editConfig(func(s map[string]any) {
			s["linux"].(map[string]any)["namespaces"] = []any{map[string]any{"type": "bogus"}}
		}), []string{"namespace", "bogus"}},
		{"missing rootfs", editConfig(func(s map[string]any) { s["root"] = map[string]any{"path": "nope"} }), []string{"rootfs"}},
		// NUL cannot be in an argument, but it can be in JSON: it must be
		// refused cleanly wherever it reaches the kernel.
		{"NUL in mount destination", editConfig(func(s map[string]any) {
			s["mounts"] = append(s["mounts"].([]any), map[string]any{"destination": "/x\x00y", "type": "tmpfs", "source": "tmpfs"})
		}), []string{"mount", "null byte"}},
		{"NUL in env", editConfig(func(s map[string]any) { process(s)["env"] = []string{"A=\x00"} }), []string{"nul byte"}},
		{"missing", func(t *testing.T, m *mode, dir string, _ map[string]any) {}, []string{"config.json", "not found"}},
		{"folder", func(t *testing.T, m *mode, dir string, _ map[string]any) {
			m.mkdir(t, filepath.Join(filepath.Base(dir), "config.json"))
		}, []string{"config.json"}},
		{"fifo", func(t *testing.T, m *mode, dir string, _ map[string]any) {
			if err := syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o666); err != nil {
				t.Fatal(err)
			}
		}, []string{"config.json", "not a regular file"}},
		{"char device", func(t *testing.T, m *mode, dir string, _ map[string]any) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "config.json")); err != nil {
				t.Fatal(err)
			}
		}, []string{"config.json", "not a regular file"}},
	}
}

// TestHostileConfig feeds each hostile config.json to create, run and
// skillrun's `run BUNDLE`: exit 1, one error line naming the file or
// field, nothing left behind.
func TestHostileConfig(t *testing.T) {
	t.Parallel()
	forEachMode(t, func(t *testing.T, m *mode) {
		for _, c := range configCases() {
			t.Run(c.name, func(t *testing.T) {
				dir := m.newBundle(t, "bundle-"+nonName.ReplaceAllString(c.name, "_"), nil, "true")
				valid := m.specTemplate(t)
				process(valid)["args"] = []string{"true"}
				process(valid)["terminal"] = false
				if err := os.Remove(filepath.Join(dir, "config.json")); err != nil {
					t.Fatal(err)
				}
				c.prepare(t, m, dir, valid)
				id := uniqueID(t)
				m.track(t, id)
				for _, args := range [][]string{
					{"create", "--bundle", dir, id},
					{"run", "--bundle", dir, id},
					{"run", dir},
				} {
					res := m.run(t, opts{stdin: strings.NewReader("")}, args...)
					want := c.want
					if notBundle[c.name] && len(args) == 2 {
						want = []string{"not a bundle", dir}
					}
					wantError(t, res, 1, want...)
				}
				m.assertClean(t, []string{id})
			})
		}
	})
}
