package seatbelt

import (
	"errors"
	"fmt"
	"strings"
)

// node is a parsed s-expression: a list, a string or a symbol.
type node struct {
	list   []node
	isList bool
	str    string
	isStr  bool
	sym    string
	offset int
}

func (n node) String() string {
	switch {
	case n.isList:
		parts := make([]string, len(n.list))
		for i, c := range n.list {
			parts[i] = c.String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	case n.isStr:
		return quote(n.str)
	}
	return n.sym
}

// parseSexp parses SBPL text into its top-level forms. Strings may hold
// printable ASCII with \" and \\ escapes only; comments run from ';' to
// the end of the line; regex literals (#"...") are not accepted since the
// generator never writes them.
func parseSexp(text string) ([]node, error) {
	var stack [][]node
	var top []node
	var offsets []int
	push := func(n node) {
		if len(stack) == 0 {
			top = append(top, n)
			return
		}
		stack[len(stack)-1] = append(stack[len(stack)-1], n)
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case c == ';':
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case c == '(':
			stack = append(stack, nil)
			offsets = append(offsets, i)
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("offset %d: unbalanced ')'", i)
			}
			l := stack[len(stack)-1]
			off := offsets[len(offsets)-1]
			stack, offsets = stack[:len(stack)-1], offsets[:len(offsets)-1]
			push(node{list: l, isList: true, offset: off})
			i++
		case c == '"':
			start := i
			i++
			var b strings.Builder
			closed := false
			for i < len(text) {
				d := text[i]
				if d == '"' {
					closed = true
					i++
					break
				}
				if d == '\\' {
					if i+1 >= len(text) || (text[i+1] != '"' && text[i+1] != '\\') {
						return nil, fmt.Errorf("offset %d: bad escape in string", i)
					}
					b.WriteByte(text[i+1])
					i += 2
					continue
				}
				if d < 0x20 || d > 0x7e {
					return nil, fmt.Errorf("offset %d: byte %#x in string (only printable ASCII)", i, d)
				}
				b.WriteByte(d)
				i++
			}
			if !closed {
				return nil, fmt.Errorf("offset %d: unterminated string", start)
			}
			push(node{str: b.String(), isStr: true, offset: start})
		case c == '#':
			return nil, fmt.Errorf("offset %d: '#' literals are not allowed", i)
		default:
			start := i
			for i < len(text) && isSymbolByte(text[i]) {
				i++
			}
			if i == start {
				return nil, fmt.Errorf("offset %d: unexpected byte %q", i, c)
			}
			push(node{sym: text[start:i], offset: start})
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("offset %d: unbalanced '('", offsets[len(offsets)-1])
	}
	return top, nil
}

func isSymbolByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("*-_.", c) >= 0
}

// knownOp reports whether the generator may name operation op.
func knownOp(op string) bool {
	switch op {
	case "process-fork", "process-exec", "signal", "process-info*", "file-read*", "file-read-metadata",
		"file-write*", "file-write-data", "file-map-executable", "sysctl-read", "mach-lookup",
		"network-outbound", "system-socket":
		return true
	}
	return false
}

// unfilteredOp reports whether op may be allowed without a filter.
func unfilteredOp(op string) bool { return op == "process-fork" || op == "system-socket" }

// validParamKey reports whether k has the form NAME_N (NAME upper case).
func validParamKey(k string) bool {
	name, num, ok := strings.Cut(k, "_")
	if !ok || name == "" || num == "" {
		return false
	}
	for _, c := range name {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return allDigits(num)
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// validRemote reports whether s is HOST:PORT with HOST * or localhost and
// PORT * or a number: the only forms SBPL accepts.
func validRemote(s string) bool {
	host, port, ok := strings.Cut(s, ":")
	if !ok || (host != "*" && host != "localhost") {
		return false
	}
	return port == "*" || (len(port) <= 5 && allDigits(port))
}

// CheckProfile checks that text is a well-formed profile of the shape the
// generator writes: balanced s-expressions, properly escaped printable
// ASCII strings, (version 1) then (deny default), then only allow rules of
// known operations with known filters, file and exec rules always
// filtered, absolute literal paths, and (param "KEY") references that
// match params exactly (each declared key used, each used key declared).
func CheckProfile(text string, params []Param) error {
	forms, err := parseSexp(text)
	if err != nil {
		return err
	}
	declared := map[string]bool{}
	for _, p := range params {
		if !validParamKey(p.Key) {
			return fmt.Errorf("parameter key %q is not of the form NAME_N", p.Key)
		}
		if declared[p.Key] {
			return fmt.Errorf("parameter %q declared twice", p.Key)
		}
		if strings.IndexByte(p.Value, 0) >= 0 {
			return fmt.Errorf("parameter %q holds a NUL byte", p.Key)
		}
		declared[p.Key] = true
	}
	if len(forms) < 2 || forms[0].String() != "(version 1)" || forms[1].String() != "(deny default)" {
		return errors.New("profile must start with (version 1) (deny default)")
	}
	used := map[string]bool{}
	for _, f := range forms[2:] {
		if err := checkRule(f, declared, used); err != nil {
			return fmt.Errorf("offset %d: %w", f.offset, err)
		}
	}
	for k := range declared {
		if !used[k] {
			return fmt.Errorf("parameter %q is declared but not used", k)
		}
	}
	return nil
}

func checkRule(f node, declared, used map[string]bool) error {
	if !f.isList || len(f.list) < 2 || f.list[0].isList || f.list[0].isStr || f.list[0].sym != "allow" {
		return fmt.Errorf("%s: want (allow operation... filter...)", f)
	}
	i := 1
	var ops []string
	for ; i < len(f.list) && !f.list[i].isList; i++ {
		op := f.list[i]
		if op.isStr || !knownOp(op.sym) {
			return fmt.Errorf("%s: unknown operation %s", f, op)
		}
		ops = append(ops, op.sym)
	}
	if len(ops) == 0 {
		return fmt.Errorf("%s: no operation", f)
	}
	if i == len(f.list) {
		for _, op := range ops {
			if !unfilteredOp(op) {
				return fmt.Errorf("%s: %s must be filtered", f, op)
			}
		}
	}
	for ; i < len(f.list); i++ {
		if err := checkFilter(f.list[i], declared, used); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func checkFilter(f node, declared, used map[string]bool) error {
	if !f.isList || len(f.list) == 0 || f.list[0].isList || f.list[0].isStr {
		return fmt.Errorf("filter %s: want (name argument...)", f)
	}
	args := f.list[1:]
	oneString := func(check func(string) bool) error {
		if len(args) != 1 || !args[0].isStr || !check(args[0].str) {
			return fmt.Errorf("filter %s: bad argument", f)
		}
		return nil
	}
	anyString := func(string) bool { return true }
	switch name := f.list[0].sym; name {
	case "literal", "subpath":
		if len(args) != 1 {
			return fmt.Errorf("filter %s: want one argument", f)
		}
		a := args[0]
		if a.isStr {
			if !strings.HasPrefix(a.str, "/") {
				return fmt.Errorf("filter %s: path is not absolute", f)
			}
			return nil
		}
		if !a.isList || len(a.list) != 2 || a.list[0].sym != "param" || !a.list[1].isStr {
			return fmt.Errorf("filter %s: want a string or (param \"KEY\")", f)
		}
		k := a.list[1].str
		if !declared[k] {
			return fmt.Errorf("filter %s: parameter %q is not declared", f, k)
		}
		used[k] = true
		return nil
	case "sysctl-name", "sysctl-name-prefix", "global-name":
		return oneString(anyString)
	case "target":
		if len(args) != 1 || args[0].isList || args[0].isStr || args[0].sym != "same-sandbox" {
			return fmt.Errorf("filter %s: only (target same-sandbox)", f)
		}
		return nil
	case "remote":
		if len(args) != 2 || args[0].sym != "ip" || !args[1].isStr || !validRemote(args[1].str) {
			return fmt.Errorf("filter %s: want (remote ip \"HOST:PORT\") with HOST * or localhost", f)
		}
		return nil
	case "require-all", "require-any":
		if len(args) == 0 {
			return fmt.Errorf("filter %s: empty", f)
		}
		for _, a := range args {
			if err := checkFilter(a, declared, used); err != nil {
				return err
			}
		}
		return nil
	case "require-not":
		if len(args) != 1 {
			return fmt.Errorf("filter %s: want one filter", f)
		}
		return checkFilter(args[0], declared, used)
	default:
		return fmt.Errorf("filter %s: unknown filter %q", f, name)
	}
}

// stringLiterals returns every string literal of a parseable text.
func stringLiterals(text string) ([]string, error) {
	forms, err := parseSexp(text)
	if err != nil {
		return nil, err
	}
	var out []string
	var walk func(n node)
	walk = func(n node) {
		if n.isStr {
			out = append(out, n.str)
		}
		for _, c := range n.list {
			walk(c)
		}
	}
	for _, f := range forms {
		walk(f)
	}
	return out, nil
}
