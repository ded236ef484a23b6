package seatbelt

import (
	"strings"
	"testing"
)

func TestCheckProfileRejects(t *testing.T) {
	head := "(version 1)\n(deny default)\n"
	p0 := []Param{{Key: "READ_0", Value: "/x"}}
	for name, tc := range map[string]struct {
		text   string
		params []Param
	}{
		"unbalanced open":      {head + "(allow file-read* (subpath \"/a\")", nil},
		"unbalanced close":     {head + "(allow file-read* (subpath \"/a\")))", nil},
		"unterminated string":  {head + "(allow file-read* (subpath \"/a))", nil},
		"bad escape":           {head + "(allow file-read* (subpath \"/a\\n\"))", nil},
		"newline in string":    {head + "(allow file-read* (subpath \"/a\nb\"))", nil},
		"non-ascii string":     {head + "(allow file-read* (subpath \"/données\"))", nil},
		"regex literal":        {head + "(allow file-read* (regex #\"^/a\"))", nil},
		"no header":            {"(allow process-fork)", nil},
		"deny rule":            {head + "(deny file-read* (subpath \"/a\"))", nil},
		"unknown op":           {head + "(allow file-everything (subpath \"/a\"))", nil},
		"allow default":        {head + "(allow default)", nil},
		"unfiltered file op":   {head + "(allow file-write*)", nil},
		"unfiltered exec":      {head + "(allow process-exec)", nil},
		"unknown filter":       {head + "(allow file-read* (prefix \"/a\"))", nil},
		"relative literal":     {head + "(allow file-read* (subpath \"a\"))", nil},
		"undeclared param":     {head + "(allow file-read* (subpath (param \"READ_1\")))", p0},
		"unused param":         {head + "(allow process-fork)", p0},
		"bad param key":        {head + "(allow file-read* (subpath (param \"p0\")))", []Param{{Key: "p0", Value: "/x"}}},
		"duplicate param":      {head + "(allow file-read* (subpath (param \"READ_0\")))", append(p0, p0...)},
		"NUL in param":         {head + "(allow file-read* (subpath (param \"READ_0\")))", []Param{{Key: "READ_0", Value: "/a\x00"}}},
		"per-host remote":      {head + "(allow network-outbound (remote ip \"example.com:443\"))", nil},
		"target other":         {head + "(allow signal (target others))", nil},
		"empty require-any":    {head + "(allow file-read* (require-any))", nil},
		"require-not two args": {head + "(allow file-read* (require-not (subpath \"/a\") (subpath \"/b\")))", nil},
		"bare symbol form":     {head + "allow", nil},
		"stray byte":           {head + "(allow file-read* (subpath \"/a\")) {", nil},
	} {
		if err := CheckProfile(tc.text, tc.params); err == nil {
			t.Errorf("%s: CheckProfile accepted %q", name, tc.text)
		}
	}
}

func TestCheckProfileAccepts(t *testing.T) {
	text := `(version 1)
(deny default) ; comment with "quotes" and (parens
(allow process-fork)
(allow file-read* (require-all (subpath (param "READ_0")) (require-not (literal "/a\"b\\c"))))
(allow network-outbound (remote ip "localhost:8080"))
`
	if err := CheckProfile(text, []Param{{Key: "READ_0", Value: "/any \"path\" (at all)\n"}}); err != nil {
		t.Fatal(err)
	}
	lits, err := stringLiterals(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lits, "|"); got != `READ_0|/a"b\c|localhost:8080` {
		t.Errorf("literals %q", got)
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{`a`: `"a"`, `a"b`: `"a\"b"`, `a\b`: `"a\\b"`, ``: `""`} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
		n, err := parseSexp(quote(in))
		if err != nil || len(n) != 1 || !n[0].isStr || n[0].str != in {
			t.Errorf("quote(%q) does not round-trip: %v %v", in, n, err)
		}
	}
}
