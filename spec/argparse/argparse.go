// Package argparse infers a skill's input from its Python entry point:
// the add_argument calls of argparse, read from the source text (never
// run), become arguments and the JSON Schema of the equivalent input
// object. Pure: it reads only the bytes it is given.
package argparse

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Arg is one inferred argparse argument.
type Arg struct {
	// Name is the JSON property (argparse's dest).
	Name string `json:"name"`
	// Flag is the option string ("--max-words"), empty for positionals.
	Flag string `json:"flag,omitempty"`
	// Type is the JSON Schema type: string, integer, number, boolean, array.
	Type string `json:"type"`
	// Required is true for positionals and required=True options.
	Required bool `json:"required,omitempty"`
}

// addArgumentRE is compiled at its first use, not at package init (every
// skillrun process pays the inits of what it links; a leaf, this package
// does not import internal/lazyre).
var addArgumentRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.add_argument\s*\(`) })

// Infer finds argparse add_argument calls in Python source and
// returns the arguments and a JSON Schema of the equivalent input object.
// It understands literal option strings and the keywords dest, type
// (int, float, str), required, default, help, action (store_true,
// store_false, append), nargs and choices. ok is false when there is no
// add_argument call.
func Infer(src []byte) (args []Arg, schema json.RawMessage, ok bool) {
	text := string(src)
	props := map[string]any{}
	var required []string
	seen := map[string]bool{}
	for _, loc := range addArgumentRE().FindAllStringIndex(text, -1) {
		callArgs, good := splitCall(text[loc[1]:])
		if !good {
			continue
		}
		a, prop, good := argFromCall(callArgs)
		if !good || seen[a.Name] {
			continue
		}
		seen[a.Name] = true
		args = append(args, a)
		props[a.Name] = prop
		if a.Required {
			required = append(required, a.Name)
		}
	}
	if len(args) == 0 {
		return nil, nil, false
	}
	sch := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		sch["required"] = required
	}
	b, err := json.Marshal(sch)
	if err != nil {
		return nil, nil, false
	}
	return args, b, true
}

// argFromCall interprets the top-level arguments of one add_argument call.
func argFromCall(parts []string) (Arg, map[string]any, bool) {
	var a Arg
	var flags []string
	kw := map[string]string{}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if i := strings.Index(p, "="); i > 0 && isIdent(strings.TrimSpace(p[:i])) {
			kw[strings.TrimSpace(p[:i])] = strings.TrimSpace(p[i+1:])
			continue
		}
		s, ok := pyString(p)
		if !ok {
			return a, nil, false
		}
		flags = append(flags, s)
	}
	if len(flags) == 0 {
		return a, nil, false
	}
	prop := map[string]any{}
	if strings.HasPrefix(flags[0], "-") {
		// The dest is the first long option, else the first short one.
		long := ""
		for _, f := range flags {
			if strings.HasPrefix(f, "--") {
				long = f
				break
			}
		}
		if long == "" {
			long = flags[0]
		}
		a.Flag = long
		a.Name = strings.ReplaceAll(strings.TrimLeft(long, "-"), "-", "_")
		a.Required = kw["required"] == "True"
	} else {
		a.Name = flags[0]
		a.Required = true
		if n, ok := pyString(kw["nargs"]); ok && (n == "?" || n == "*") {
			a.Required = false
		}
	}
	if d, ok := pyString(kw["dest"]); ok && isIdent(d) {
		a.Name = d
	}
	if a.Name == "help" || !isIdent(a.Name) {
		return a, nil, false
	}
	a.Type = "string"
	switch kw["type"] {
	case "int":
		a.Type = "integer"
	case "float":
		a.Type = "number"
	}
	action, _ := pyString(kw["action"])
	switch action {
	case "store_true", "store_false":
		a.Type = "boolean"
		a.Required = false
	case "append", "extend":
		prop["items"] = map[string]any{"type": a.Type}
		a.Type = "array"
	case "help", "version", "count":
		return a, nil, false
	}
	if n, ok := pyString(kw["nargs"]); ok && (n == "+" || n == "*") || isInt(kw["nargs"]) && kw["nargs"] != "1" {
		if a.Type != "array" {
			prop["items"] = map[string]any{"type": a.Type}
			a.Type = "array"
		}
		if n, _ := pyString(kw["nargs"]); n == "+" {
			prop["minItems"] = 1
		}
	}
	prop["type"] = a.Type
	if h, ok := pyString(kw["help"]); ok {
		prop["description"] = h
	}
	if c := kw["choices"]; strings.HasPrefix(c, "[") || strings.HasPrefix(c, "(") {
		if items, ok := splitCall(c[1:]); ok {
			var enum []any
			for _, it := range items {
				if v, ok := pyLiteral(strings.TrimSpace(it)); ok {
					enum = append(enum, v)
				}
			}
			if len(enum) > 0 {
				if a.Type == "array" {
					prop["items"].(map[string]any)["enum"] = enum
				} else {
					prop["enum"] = enum
				}
			}
		}
	}
	if d, ok := kw["default"]; ok && a.Type != "boolean" {
		if v, ok := pyLiteral(d); ok && v != nil {
			prop["default"] = v
		}
	}
	return a, prop, true
}

// splitCall splits the text after an opening bracket into its top-level,
// comma-separated arguments, up to the matching closing bracket.
func splitCall(s string) ([]string, bool) {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			j, ok := skipString(s, i)
			if !ok {
				return nil, false
			}
			i = j
		case '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				parts = append(parts, s[start:i])
				return parts, true
			}
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return nil, false
}

// skipString returns the index of the closing quote of the Python string
// literal starting at s[i] (single, double or triple quoted).
func skipString(s string, i int) (int, bool) {
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], q+q+q) {
		end := strings.Index(s[i+3:], q+q+q)
		if end < 0 {
			return 0, false
		}
		return i + 3 + end + 2, true
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q[0]:
			return j, true
		case '\n':
			return 0, false
		}
	}
	return 0, false
}

// pyString decodes a simple Python string literal (optionally with an r,
// u or f-less prefix); adjacent literals are not supported.
func pyString(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) > 0 && (s[0] == 'r' || s[0] == 'u' || s[0] == 'R' || s[0] == 'U') {
		s = s[1:]
	}
	if len(s) < 2 {
		return "", false
	}
	q := s[0]
	if q != '\'' && q != '"' {
		return "", false
	}
	if len(s) >= 6 && strings.HasPrefix(s, strings.Repeat(string(q), 3)) && strings.HasSuffix(s, strings.Repeat(string(q), 3)) {
		return s[3 : len(s)-3], true
	}
	if s[len(s)-1] != q {
		return "", false
	}
	body := s[1 : len(s)-1]
	if q == '\'' {
		body = strings.ReplaceAll(strings.ReplaceAll(body, `\'`, `'`), `"`, `\"`)
	}
	out, err := strconv.Unquote(`"` + body + `"`)
	if err != nil {
		return body, true
	}
	return out, true
}

// pyLiteral decodes a Python string, number, True/False/None literal.
func pyLiteral(s string) (any, bool) {
	s = strings.TrimSpace(s)
	switch s {
	case "True":
		return true, true
	case "False":
		return false, true
	case "None":
		return nil, true
	}
	if v, ok := pyString(s); ok {
		return v, true
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	return nil, false
}

func isInt(s string) bool {
	_, err := strconv.Atoi(strings.TrimSpace(s))
	return err == nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
