package openshell

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// quantitySuffixes are the Kubernetes quantity suffixes OpenShell's
// resource strings use ("500m", "2", "256Mi", "4Gi", "1G").
var quantitySuffixes = []struct {
	suffix string
	mul    *big.Rat
}{
	{"Ki", big.NewRat(1<<10, 1)},
	{"Mi", big.NewRat(1<<20, 1)},
	{"Gi", big.NewRat(1<<30, 1)},
	{"Ti", big.NewRat(1<<40, 1)},
	{"Pi", big.NewRat(1<<50, 1)},
	{"Ei", big.NewRat(1<<60, 1)},
	{"m", big.NewRat(1, 1000)},
	{"k", big.NewRat(1e3, 1)},
	{"M", big.NewRat(1e6, 1)},
	{"G", big.NewRat(1e9, 1)},
	{"T", big.NewRat(1e12, 1)},
	{"P", big.NewRat(1e15, 1)},
	{"E", big.NewRat(1e18, 1)},
}

// parseQuantity parses a non-negative Kubernetes-style quantity into an
// exact rational number of base units.
func parseQuantity(s string) (*big.Rat, error) {
	num := s
	mul := big.NewRat(1, 1)
	for _, q := range quantitySuffixes {
		if strings.HasSuffix(s, q.suffix) {
			num, mul = strings.TrimSuffix(s, q.suffix), q.mul
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "eE+-/ ") {
		return nil, fmt.Errorf("%q is not a quantity (want e.g. 500m, 2, 256Mi, 4Gi)", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return nil, fmt.Errorf("%q is not a quantity (want e.g. 500m, 2, 256Mi, 4Gi)", s)
	}
	return r.Mul(r, mul), nil
}

// parseBytes parses a memory quantity into bytes (rounded up).
func parseBytes(s string) (int64, error) {
	r, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	n := new(big.Int).Quo(new(big.Int).Add(r.Num(), new(big.Int).Sub(r.Denom(), big.NewInt(1))), r.Denom())
	if !n.IsInt64() || n.Int64() <= 0 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n.Int64(), nil
}

// parseMilliCPU parses a CPU quantity into thousandths of a CPU (rounded up).
func parseMilliCPU(s string) (int64, error) {
	r, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	r.Mul(r, big.NewRat(1000, 1))
	n := new(big.Int).Quo(new(big.Int).Add(r.Num(), new(big.Int).Sub(r.Denom(), big.NewInt(1))), r.Denom())
	if !n.IsInt64() || n.Int64() <= 0 || n.Int64() > math.MaxInt32 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n.Int64(), nil
}
