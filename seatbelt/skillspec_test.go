package seatbelt

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/skillrun/skillrun/spec"
)

// TestSkillProfileTranslates checks that what spec.Generate produces for
// darwin is fully expressible in Seatbelt: every example skill's spec has
// no rejected field, so `skillrun skill run` on a Mac needs no
// --accept-degradation.
func TestSkillProfileTranslates(t *testing.T) {
	dirs, err := filepath.Glob("../examples/skills/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example skills: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			s, err := spec.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			opts := []spec.Option{spec.WithBundleDir(t.TempDir()), spec.WithHostID(501, 20)}
			if !s.HasEntry() {
				// A skill used through its scripts: one of them, as skill
				// exec runs it.
				opts = append(opts, spec.WithExec(spec.Exec{Args: []string{"sh", "-c", "ls"}}))
			}
			sp, err := spec.Generate(s, "darwin", opts...)
			var pe *spec.PolicyError
			if errors.As(err, &pe) {
				// Grant what the example declares (network, workspace).
				opts = append(opts, spec.WithGrants(spec.Grants{Network: "host"}), spec.WithGrants(spec.Grants{Workspace: t.TempDir()}))
				sp, err = spec.Generate(s, "darwin", opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			if rej := Explain(sp).Of(Rejected); len(rej) > 0 {
				t.Fatalf("darwin skill spec has rejected fields: %+v", rej)
			}
		})
	}
}
