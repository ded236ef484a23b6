package openshell

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The hand-written name checks accept exactly what the regular
// expressions they replace (kept here as the oracle) match.
func TestNameChecksMatchTheirPatterns(t *testing.T) {
	id := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	host := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	env := regexp.MustCompile(`^[^=\x00]+$`)
	cases := []string{"", "a", "-", "a-", "-a", "a.b_c-d", "A", "é", "a b", "a/b", "..", ".a", "a=b", "a\x00b",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 128), strings.Repeat("a", 129)}
	const alphabet = "aZ09-_.=/ \x00é"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(140))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validID(s), id.MatchString(s); got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validHostname(s), host.MatchString(s); got != want {
			t.Errorf("validHostname(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validEnvKey(s), env.MatchString(s); got != want {
			t.Errorf("validEnvKey(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
