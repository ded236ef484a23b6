package openshell

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseQuantity checks properties of the quantity parser
// (parseQuantity, parseBytes, parseMilliCPU) on any string, as a request
// of the compute driver's client carries it: no panic; a quantity is
// never negative; the byte and milli-CPU values are the quantity rounded
// up, in their ranges; an error names the input. (Kept in a file of its
// own, calling the parsers by name only: the parser may be rewritten.)
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"1", "64Mi", "1Gi", "1G", "1.5Ki", "100k", "0.5", "500m", "2", "0.25", "1m", "0.0001",
		"", "-1", "1e3", "1/2", " 1", "Mi", "1Xi", "9223372036854775808", "8Ei", "0", "0.000000001m", "2147483.647", "1.Ki"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 {
			return // requests carry short strings; a long digit string only costs big.Rat time
		}
		q, err := parseQuantity(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("parseQuantity(%q): error %q does not name the input", s, err)
			}
			if _, err := parseBytes(s); err == nil {
				t.Fatalf("parseBytes(%q) succeeded where parseQuantity failed", s)
			}
			if _, err := parseMilliCPU(s); err == nil {
				t.Fatalf("parseMilliCPU(%q) succeeded where parseQuantity failed", s)
			}
			return
		}
		if q.Sign() < 0 {
			t.Fatalf("parseQuantity(%q) = %v, negative", s, q)
		}
		ceil := func(r *big.Rat) *big.Int {
			n := new(big.Int).Quo(r.Num(), r.Denom())
			if new(big.Rat).SetInt(n).Cmp(r) < 0 {
				n.Add(n, big.NewInt(1))
			}
			return n
		}
		if b, err := parseBytes(s); err == nil {
			if want := ceil(q); !want.IsInt64() || want.Int64() != b || b <= 0 {
				t.Fatalf("parseBytes(%q) = %d, want %v (the quantity %v rounded up, > 0)", s, b, want, q)
			}
		} else if want := ceil(q); want.IsInt64() && want.Int64() > 0 {
			t.Fatalf("parseBytes(%q) failed (%v) for %v bytes", s, err, want)
		}
		milli := new(big.Rat).Mul(q, big.NewRat(1000, 1))
		if m, err := parseMilliCPU(s); err == nil {
			if want := ceil(milli); !want.IsInt64() || want.Int64() != m || m <= 0 || m > math.MaxInt32 {
				t.Fatalf("parseMilliCPU(%q) = %d, want %v (the quantity x 1000 rounded up, in 1..MaxInt32)", s, m, want)
			}
		} else if want := ceil(milli); want.IsInt64() && want.Int64() > 0 && want.Int64() <= math.MaxInt32 {
			t.Fatalf("parseMilliCPU(%q) failed (%v) for %v", s, err, want)
		}
	})
}
