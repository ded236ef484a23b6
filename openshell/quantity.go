package openshell

// The template's resource strings are Kubernetes quantities. One parser,
// k8s.io/apimachinery's resource.ParseQuantity (Kubernetes' own grammar:
// "500m", "2", "0.5", "+1", "1e3", "129e6", "256Mi", "1Gi", "1G"), turns
// them into the CPU quota and memory limit, and the same function checks
// them for ValidateSandboxCreate and applies them for CreateSandbox, so a
// request Validate accepts is one Create can apply. The limits the kernel
// and the runtime refuse (a CFS quota under 1 ms, a memory limit the
// container's own init does not fit in) are refused here, not by the
// cgroup write at create time.

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// cpuPeriod is the CFS period of every sandbox, in microseconds.
	cpuPeriod = 100000
	// MinMilliCPU is the smallest cpu_limit: the kernel refuses a CFS
	// quota under 1000 us (cpu.cfs_quota_us, cpu.max: EINVAL), which is
	// 10m of the 100 ms period.
	MinMilliCPU = 10
	// maxMilliCPU keeps the quota far below the kernel's maximum.
	maxMilliCPU = math.MaxInt32
	// MinMemoryBytes is the smallest memory_limit: the Docker daemon's
	// minimum (6 MiB, which the Docker driver's sandboxes therefore
	// have), below which the container's own init is killed or the
	// cgroup write fails.
	MinMemoryBytes = 6 << 20
	// maxQuantityExponent bounds a quantity's decimal exponent before it
	// is parsed: resource.ParseQuantity takes time that grows with
	// |exponent| (seconds for 1e-30000000; "1e-2147483647" never
	// returns), and no limit is anywhere near 10^±30.
	maxQuantityExponent = 30
)

// cpuLimit parses cpu_limit: parseMilliCPU, at least MinMilliCPU.
func cpuLimit(s string) (int64, error) {
	milli, err := parseMilliCPU(s)
	if err == nil && milli < MinMilliCPU {
		err = fmt.Errorf("%q is below the minimum %dm (the kernel's smallest CFS quota: 1 ms per 100 ms period)", s, MinMilliCPU)
	}
	return milli, err
}

// memoryLimit parses memory_limit: parseBytes, at least MinMemoryBytes.
func memoryLimit(s string) (int64, error) {
	n, err := parseBytes(s)
	if err == nil && n < MinMemoryBytes {
		err = fmt.Errorf("%q is below the minimum 6Mi", s)
	}
	return n, err
}

// parseQuantity parses s with Kubernetes' grammar after a bound on the
// size of its exponent, and returns it as an exact decimal.
func parseQuantity(s string) (*inf.Dec, error) {
	if len(s) > 64 {
		return nil, fmt.Errorf("%q is not a quantity: longer than 64 characters", s)
	}
	if exp, ok := decimalExponent(s); ok && exp != "" && strings.Trim(exp, "0123456789") == "" && (len(exp) > 3 || atoi(exp) > maxQuantityExponent) {
		return nil, fmt.Errorf("%q: the exponent is out of range (at most e%d)", s, maxQuantityExponent)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)", s)
	}
	return q.AsDec(), nil
}

// decimalExponent returns the digits of s's decimal exponent ("e3",
// "E-6", "e+2" give "3", "6", "2"), if it has one: the part after an e or
// E that follows the number. A trailing "E" alone is the exa suffix.
func decimalExponent(s string) (string, bool) {
	s = strings.TrimLeft(s, "+-")
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 || (s[i] != 'e' && s[i] != 'E') || i+1 == len(s) {
		return "", false
	}
	return strings.TrimLeft(s[i+1:], "+-"), true
}

func atoi(digits string) int {
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	return n
}

// scaledCeil returns d*10^scale rounded up, when it fits an int64.
func scaledCeil(d *inf.Dec, scale inf.Scale) (int64, bool) {
	r := new(inf.Dec).Round(d, scale, inf.RoundCeil)
	n := new(big.Int).Set(r.UnscaledBig())
	if r.Scale() < scale {
		n.Mul(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale-r.Scale())), nil))
	}
	if !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

// parseMilliCPU parses a positive CPU quantity into thousandths of a CPU,
// rounded up (as Kubernetes' MilliValue), at most maxMilliCPU.
func parseMilliCPU(s string) (int64, error) {
	d, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	if d.Sign() <= 0 {
		return 0, fmt.Errorf("%q: must be greater than zero", s)
	}
	// A magnitude check before any rounding: 10^30 needs no big.Int.
	if magnitude(d) > 12 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	milli, ok := scaledCeil(d, 3)
	if !ok || milli > maxMilliCPU {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return milli, nil
}

// parseBytes parses a positive memory quantity into bytes, rounded up (as
// Kubernetes' Value).
func parseBytes(s string) (int64, error) {
	d, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	if d.Sign() <= 0 {
		return 0, fmt.Errorf("%q: must be greater than zero", s)
	}
	if magnitude(d) > 19 {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	n, ok := scaledCeil(d, 0)
	if !ok {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// magnitude is the number of digits of d's integer part (0 below 1).
func magnitude(d *inf.Dec) int {
	return len(d.UnscaledBig().Text(10)) - int(d.Scale())
}
