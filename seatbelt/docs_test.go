package seatbelt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	docsFile    = "../docs/macos.md"
	docsBegin   = "<!-- BEGIN GENERATED FIELD TABLE: go test ./seatbelt -run TestDocsTable -update -->"
	docsEnd     = "<!-- END GENERATED FIELD TABLE -->"
	docsHeading = "| Field | Case | Class | What happens on macOS | Rule |\n|---|---|---|---|---|\n"
)

// docsTable renders Fields as the markdown table in docs/macos.md.
func docsTable() string {
	var b strings.Builder
	b.WriteString(docsHeading)
	for _, r := range Fields() {
		when := r.When
		if when == "" {
			when = "any"
		}
		b.WriteString("| `" + r.Field + "` | " + when + " | **" + string(r.Class) + "** | " + r.Detail + " | `" + r.ID + "` |\n")
	}
	return b.String()
}

// TestDocsTable keeps docs/macos.md's field table equal to Fields, so the
// documentation cannot drift from the code.
func TestDocsTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.FromSlash(docsFile))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, docsBegin), strings.Index(doc, docsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q ... %q", docsFile, docsBegin, docsEnd)
	}
	want := doc[:i+len(docsBegin)] + "\n" + docsTable() + doc[j:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(filepath.FromSlash(docsFile), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's field table is out of date: run go test ./seatbelt -run TestDocsTable -update", docsFile)
}
