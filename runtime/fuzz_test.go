package runtime

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseSpec checks properties of the config.json loader: it never
// returns a nil spec with a nil error, errors are one line, an accepted
// spec has what every runtime needs (root.path, process with an absolute
// cwd and args), and re-encoding an accepted spec parses to the same spec.
func FuzzParseSpec(f *testing.F) {
	good := `{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"cwd":"/","args":["sh"]}}`
	for _, s := range []string{
		good,
		good[:40],
		"null", "[]", "{}", `"x"`, "",
		`{"root":{"path":"r"},"process":{"cwd":"/","args":"sh"}}`,
		`{"root":{"path":"r"},"process":{"cwd":"x","args":["sh"]}}`,
		`{"root":5}`,
		"{\n\"root\": ,}",
		good + "{}",
		`{"root":{"path":"r"},"process":{"cwd":"/","args":["a\u0000b"],"user":{"uid":-1}}}`,
		`{"root":{"path":"r"},"process":{"cwd":"/","args":["sh"]},"linux":{"namespaces":[{"type":"pid"}],"resources":{"memory":{"limit":-1}}},"mounts":[{"destination":"/x","type":"tmpfs"}],"annotations":{"a":"b"}}`,
		`{"x":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := ParseSpec(data)
		if err != nil {
			if spec != nil {
				t.Fatalf("error %v with a non-nil spec", err)
			}
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error is empty or not one line: %q", msg)
			}
			return
		}
		if spec == nil {
			t.Fatal("nil spec with nil error")
		}
		if spec.Root == nil || spec.Root.Path == "" || spec.Process == nil || len(spec.Process.Args) == 0 || !strings.HasPrefix(spec.Process.Cwd, "/") {
			t.Fatalf("accepted a spec without root.path, process.args or an absolute cwd: %s", data)
		}
		out, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := ParseSpec(out)
		if err != nil {
			t.Fatalf("re-encoded spec refused: %v\n%s", err, out)
		}
		// Equal encodings (empty and absent maps encode alike).
		if out2, _ := json.Marshal(again); !reflect.DeepEqual(out, out2) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", out, out2)
		}
	})
}
