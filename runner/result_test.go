package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/skillrun/skillrun/spec"
)

// encodedLen is the size of v as `skill run` prints it (HTML not
// escaped), without the newline.
func encodedLen(t *testing.T, v any) int {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Len() - 1
}

// TestOutputEscapesWithinLimit: stdout that is not JSON is returned as a
// JSON string; whatever it holds (control bytes, invalid UTF-8, quotes,
// U+2028), the string's JSON form stays within the output limit, so the
// whole result stays within the limit plus the documented margin. What
// the cut leaves out is counted in output_dropped. Text whose JSON form
// fits is kept whole.
func TestOutputEscapesWithinLimit(t *testing.T) {
	const limit = 64 << 10
	for _, tc := range []struct {
		name string
		out  string
		cut  bool
	}{
		{"control", strings.Repeat("\x01", limit), true},
		{"invalid-utf8", strings.Repeat("\xff", limit), true},
		{"quotes", strings.Repeat(`"\`, limit/2), true},
		{"line-separators", strings.Repeat("\u2028", limit/3), true},
		{"mixed", strings.Repeat("ab\x00c\xe9\u00e9\n\u2029\x1b[", limit/16), true},
		{"plain", strings.Repeat("plain text ", limit/11), false},
		{"small-control", strings.Repeat("\x01", limit/6-1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRT{behave: exited(tc.out, strings.Repeat("\x02", 8<<10), 0, true)}
			res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`),
				Options{TempDir: t.TempDir(), Grants: spec.Grants{OutputLimit: limit}})
			if err != nil {
				t.Fatal(err)
			}
			s, ok := res.Output.(string)
			if !ok {
				t.Fatalf("output is %T, want a string", res.Output)
			}
			n := encodedLen(t, s) - 2 // the quotes
			whole := encodedLen(t, res)
			var m map[string]any
			b, _ := json.Marshal(res)
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			dropped, _ := m["output_dropped"].(float64)
			t.Logf("%d bytes of output: kept %d, JSON string %d bytes, result %d bytes, output_dropped %v", len(tc.out), len(s), n, whole, m["output_dropped"])
			if n > limit {
				t.Errorf("the output's JSON string is %d bytes, over the %d-byte output limit", n, limit)
			}
			if whole > limit+96<<10 {
				t.Errorf("the result is %d bytes, over the output limit + 96 KiB", whole)
			}
			if !strings.HasPrefix(tc.out, s) {
				t.Errorf("the output kept is not a prefix of what the skill wrote")
			}
			if tc.cut {
				if int(dropped) != len(tc.out)-len(s) || dropped == 0 {
					t.Errorf("output_dropped %v, want %d (%d written, %d kept)", m["output_dropped"], len(tc.out)-len(s), len(tc.out), len(s))
				}
				if len(s)*6 < limit-6 {
					t.Errorf("cut to %d bytes (%d of JSON): a byte is at most 6 of JSON, want at least %d kept", len(s), n, (limit-6)/6)
				}
				if utf8.ValidString(tc.out) && !utf8.ValidString(s) {
					t.Errorf("cut inside a character")
				}
			} else if s != tc.out || m["output_dropped"] != nil {
				t.Errorf("a fitting output was cut: kept %d of %d bytes, output_dropped %v", len(s), len(tc.out), m["output_dropped"])
			}
		})
	}
}

// TestOutputJSONWithinLimit: a JSON stdout is returned as JSON, compacted;
// the encoder escapes U+2028 and U+2029 even there (6 bytes for 3, with
// GOEXPERIMENT=jsonv2), so a document that would grow past the output
// limit so is returned as text, cut like any text. One that fits stays
// JSON.
func TestOutputJSONWithinLimit(t *testing.T) {
	const limit = 64 << 10
	for _, tc := range []struct {
		name, out string
		json      bool
	}{
		{"line-separators", `["` + strings.Repeat("\u2028", limit/3-2) + `"]`, false},
		{"one-separator", "{\n  \"a\": \"\u2028\",\n  \"b\": \"" + strings.Repeat("x", limit-40) + "\"\n}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &fakeRT{behave: exited(tc.out, "", 0, true)}
			res, err := runJSON(context.Background(), rt, load(t, "calculator"), []byte(`{"expression": "1"}`),
				Options{TempDir: t.TempDir(), Grants: spec.Grants{OutputLimit: limit}})
			if err != nil {
				t.Fatal(err)
			}
			n := encodedLen(t, res.Output)
			t.Logf("%d bytes of JSON output: output %T, %d bytes in the result, output_dropped %d", len(tc.out), res.Output, n, res.OutputDropped)
			if _, isJSON := res.Output.(json.RawMessage); isJSON != tc.json {
				t.Errorf("output is %T, want JSON %v", res.Output, tc.json)
			}
			if _, isString := res.Output.(string); isString {
				n -= 2 // the quotes
			}
			if n > limit {
				t.Errorf("the output is %d bytes in the result, over the %d-byte output limit", n, limit)
			}
		})
	}
}
