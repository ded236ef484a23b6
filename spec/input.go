package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/skillrun/skillrun/spec/argparse"
)

// Schema sources, reported in Input.Source.
const (
	SchemaDeclared = "declared"
	SchemaArgparse = "argparse"
	SchemaDefault  = "default"
)

// Input describes a skill's input: its JSON Schema, where the schema came
// from, and how the input reaches the entry point.
type Input struct {
	// Schema is the JSON Schema of the input object.
	Schema json.RawMessage `json:"schema"`
	// Source is "declared", "argparse" or "default".
	Source string `json:"source"`
	// Mode is InputStdin or InputArgv.
	Mode string `json:"mode"`
	// Args describes the argparse arguments when Source is "argparse", in
	// declaration order; the runner uses it to build argv.
	Args []Arg `json:"args,omitempty"`
}

// Arg is one inferred argparse argument (see package spec/argparse).
type Arg = argparse.Arg

// DefaultSchema is the schema of skills that declare none: any object.
var defaultSchema = json.RawMessage(`{"type":"object"}`)

// resolveInput sets s.Input from the manifest, the entry script or the
// default.
func (s *Skill) resolveInput() error {
	in := &s.Input
	switch {
	case s.Manifest.Input.Schema != "":
		rel := s.Manifest.Input.Schema
		data, err := readSkillFile(s.Dir, rel, MaxSchemaSize)
		if err != nil {
			return fmt.Errorf("%s: input.schema: %q: %w", ManifestFile, rel, err)
		}
		sch, err := compileSchema(data)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		s.compiled = sch
		in.Schema, in.Source, in.Mode = compactJSON(data), SchemaDeclared, InputStdin
	case s.Entry.Kind == KindPython:
		src, err := readSkillFile(s.Dir, s.Entry.Path, MaxEntryScanSize)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Entry.Path, err)
		}
		args, schema, ok := argparse.Infer(src)
		if ok {
			in.Schema, in.Source, in.Mode, in.Args = schema, SchemaArgparse, InputArgv, args
			break
		}
		in.Schema, in.Source, in.Mode = append(json.RawMessage(nil), defaultSchema...), SchemaDefault, InputStdin
	default:
		in.Schema, in.Source, in.Mode = append(json.RawMessage(nil), defaultSchema...), SchemaDefault, InputStdin
	}
	if m := s.Manifest.Input.Mode; m != "" {
		if m == InputArgv && in.Source != SchemaArgparse {
			return fmt.Errorf("%s: input.mode: argv needs a schema inferred from argparse", ManifestFile)
		}
		in.Mode = m
	}
	return nil
}

func compactJSON(b []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return append(json.RawMessage(nil), b...)
	}
	return buf.Bytes()
}

// compileSchema compiles a JSON Schema document (draft 2020-12; draft-07
// documents validate the same for the keywords skills use).
func compileSchema(data []byte) (*jsonschema.Resolved, error) {
	if !json.Valid(data) {
		var v any
		return nil, fmt.Errorf("not valid JSON: %w", json.Unmarshal(data, &v))
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(data, &sch); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", oneLine(err.Error()))
	}
	res, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %s", oneLine(err.Error()))
	}
	return res, nil
}

// ValidateInput checks input (a JSON document) against the skill's input
// schema and returns it decoded. The default schema is checked without
// compiling a schema (hot path).
func (s *Skill) ValidateInput(input []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = []byte("{}")
	}
	// JSON text is UTF-8 (RFC 8259). Go's decoder would replace invalid
	// bytes with U+FFFD, so the schema would check a different document
	// than the raw bytes the skill receives.
	if !utf8.Valid(input) {
		return nil, errors.New("input: not valid UTF-8 (JSON text must be UTF-8)")
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, errors.New("input: must be a JSON object")
		}
		return nil, fmt.Errorf("input: not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("input: trailing data after the JSON object")
	}
	if obj == nil {
		return nil, errors.New("input: must be a JSON object, not null")
	}
	if s.Input.Source == SchemaDefault || len(s.Input.Schema) == 0 {
		return obj, nil
	}
	sch := s.compiled
	if sch == nil {
		var err error
		if sch, err = compileSchema(s.Input.Schema); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
	}
	var inst any
	if err := json.Unmarshal(input, &inst); err != nil {
		return nil, fmt.Errorf("input: not valid JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return nil, fmt.Errorf("input: %s", oneLine(strings.TrimPrefix(err.Error(), "validating root: ")))
	}
	return obj, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Argv converts a validated input object into command-line arguments for
// skills whose schema was inferred from argparse: positionals in
// declaration order, then "--flag value" for each present option, "--flag"
// for true booleans, "--flag v1 v2" for arrays. Other input modes give nil.
func (s *Skill) Argv(obj map[string]any) ([]string, error) {
	if s.Input.Mode != InputArgv {
		return nil, nil
	}
	var pos, opt []string
	for _, a := range s.Input.Args {
		v, ok := obj[a.Name]
		if !ok || v == nil {
			continue
		}
		vals, err := argValues(a, v)
		if err != nil {
			return nil, err
		}
		if a.Flag == "" {
			pos = append(pos, vals...)
			continue
		}
		if a.Type == "boolean" {
			if v == true {
				opt = append(opt, a.Flag)
			}
			continue
		}
		// "--flag=value" keeps values that start with "-" from being read
		// as options; arrays need separate words.
		if a.Type == "array" {
			if len(vals) > 0 {
				opt = append(opt, a.Flag)
				opt = append(opt, vals...)
			}
			continue
		}
		opt = append(opt, a.Flag+"="+vals[0])
	}
	if len(pos) > 0 {
		// "--" ends options so positionals starting with "-" stay values.
		opt = append(opt, "--")
	}
	return append(opt, pos...), nil
}

func argValues(a Arg, v any) ([]string, error) {
	scalar := func(x any) (string, error) {
		switch t := x.(type) {
		case string:
			return t, nil
		case json.Number:
			return t.String(), nil
		case bool:
			return strconv.FormatBool(t), nil
		case float64:
			return strconv.FormatFloat(t, 'g', -1, 64), nil
		}
		return "", fmt.Errorf("input: %s: must be a string or number", a.Name)
	}
	if arr, ok := v.([]any); ok {
		out := make([]string, 0, len(arr))
		for _, x := range arr {
			s, err := scalar(x)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	s, err := scalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}
