package argparse

import (
	"encoding/json"
	"reflect"
	"testing"
)

// argparseSrc is the same script spec's tests load as a skill.
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

func TestInfer(t *testing.T) {
	args, schema, ok := Infer([]byte(argparseSrc))
	if !ok {
		t.Fatal("no arguments inferred")
	}
	want := []Arg{
		{Name: "path", Type: "string", Required: true},
		{Name: "max_words", Flag: "--max-words", Type: "integer"},
		{Name: "ratio", Flag: "--ratio", Type: "number", Required: true},
		{Name: "verbose", Flag: "--verbose", Type: "boolean"},
		{Name: "tag", Flag: "--tag", Type: "array"},
		{Name: "mode", Flag: "--mode", Type: "string"},
		{Name: "files", Flag: "--files", Type: "array"},
		{Name: "output_file", Flag: "--out", Type: "string"},
	}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args:\n got %+v\nwant %+v", args, want)
	}
	var got map[string]any
	if err := json.Unmarshal(schema, &got); err != nil {
		t.Fatal(err)
	}
	props := got["properties"].(map[string]any)
	if d := props["max_words"].(map[string]any); d["default"] != float64(10) || d["description"] != `limit, "quoted"` {
		t.Errorf("max_words = %v", d)
	}
	if e := props["mode"].(map[string]any)["enum"]; !reflect.DeepEqual(e, []any{"fast", "slow"}) {
		t.Errorf("mode enum = %v", e)
	}
	if f := props["files"].(map[string]any); f["minItems"] != float64(1) {
		t.Errorf("files = %v", f)
	}
	if !reflect.DeepEqual(got["required"], []any{"path", "ratio"}) || got["additionalProperties"] != false {
		t.Errorf("schema = %s", schema)
	}
	if _, _, ok := Infer([]byte("import sys\nprint(sys.argv)\n")); ok {
		t.Error("inferred arguments from a script without argparse")
	}
}
