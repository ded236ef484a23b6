package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkHotPath measures what `skill run` does in this package before
// the runtime starts: Load, Generate and WriteBundle of a Python skill.
func BenchmarkHotPath(b *testing.B) {
	dir := filepath.Join("..", "examples", "skills", "calculator")
	tmp := b.TempDir()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.ValidateInput([]byte(`{"expression": "1+1"}`)); err != nil {
			b.Fatal(err)
		}
		sp, err := Generate(s, "linux", WithHostID(1000, 1000))
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.MkdirTemp(tmp, "b")
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteBundle(out, sp); err != nil {
			b.Fatal(err)
		}
	}
}
