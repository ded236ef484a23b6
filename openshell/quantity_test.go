package openshell

import (
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// TestParseQuantity: Kubernetes' grammar (signs, exponents, decimal and
// binary suffixes), rounded up as Kubernetes rounds, and what is refused.
func TestParseQuantity(t *testing.T) {
	for in, want := range map[string]int64{
		"1": 1, "64Mi": 64 << 20, "1Gi": 1 << 30, "1G": 1e9, "1.5Ki": 1536, "100k": 1e5, "0.5": 1,
		"1e3": 1000, "129e6": 129e6, "+1": 1, "1E3": 1000, "1e+3": 1000, ".5Ki": 512, "5.": 5, "1.5e3": 1500,
		"99999999999Ei": math.MaxInt64, // Kubernetes clamps what is larger than an int64
	} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]int64{"500m": 500, "2": 2000, "0.25": 250, "1m": 1, "0.0001": 1, "1e3": 1e6, "+1": 1000, "1e-3": 1, "2147483647m": math.MaxInt32} {
		got, err := parseMilliCPU(in)
		if err != nil || got != want {
			t.Errorf("parseMilliCPU(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                      `"" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"lots":                  `"lots" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"Mi":                    `"Mi": must be greater than zero`, // Kubernetes reads a bare suffix as 0
		"1 Gi":                  `"1 Gi" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"1/2":                   `"1/2" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"1e3Mi":                 `"1e3Mi" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"1ki":                   `"1ki" is not a quantity (want e.g. 500m, 2, 0.5, 1e3, 256Mi, 4Gi)`,
		"-1":                    `"-1": must be greater than zero`,
		"0":                     `"0": must be greater than zero`,
		"-0.5Gi":                `"-0.5Gi": must be greater than zero`,
		"1e31":                  `"1e31": the exponent is out of range (at most e30)`,
		"1e-2147483647":         `"1e-2147483647": the exponent is out of range (at most e30)`,
		strings.Repeat("1", 65): `"` + strings.Repeat("1", 65) + `" is not a quantity: longer than 64 characters`,
	} {
		if n, err := parseBytes(in); err == nil || err.Error() != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %q", in, n, err, want)
		}
	}
	for _, in := range []string{"2147483648m", "1e30", "99999999999Ei"} {
		if n, err := parseMilliCPU(in); err == nil || err.Error() != `"`+in+`" is out of range` {
			t.Errorf("parseMilliCPU(%q) = %d, %v; want out of range", in, n, err)
		}
	}
}

// FuzzParseQuantity: parseQuantity accepts exactly what Kubernetes'
// ParseQuantity accepts, but for what its bounds refuse first (longer
// than 64 characters, an exponent over 30), and never panics; the bounds
// keep every parse fast.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"500m", "1e3", "+1", "129e6", "1.5Ki", "-1", "1E", "1Ei", "1e-3", ".5", "5.", "1e", "e3", "0x1", "1e999", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		d, err := parseQuantity(s)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("parseQuantity(%q) took %v", s, el)
		}
		bounded := err != nil && (strings.Contains(err.Error(), "longer than 64") || strings.Contains(err.Error(), "exponent is out of range"))
		if bounded {
			return
		}
		q, kerr := resource.ParseQuantity(s)
		if (err == nil) != (kerr == nil) {
			t.Fatalf("parseQuantity(%q): %v; Kubernetes: %v", s, err, kerr)
		}
		if err == nil && d.Cmp(q.AsDec()) != 0 {
			t.Fatalf("parseQuantity(%q) = %v, Kubernetes %v", s, d, q.AsDec())
		}
	})
}

// TestValidateEqualsCreate: on a table of quantities, ValidateSandboxCreate
// and CreateSandbox give the same answer (the same status and message),
// and what they accept is what config.json gets.
func TestValidateEqualsCreate(t *testing.T) {
	d := newDriver(t, testConfig(t, fake.New()))
	ctx := testCtx(t)
	type applied struct{ quota, mem int64 }
	for i, tc := range []struct {
		cpu, mem string
		want     applied // zero: refused with FailedPrecondition
	}{
		{"500m", "64Mi", applied{50000, 64 << 20}},
		{"1e3", "129e6", applied{100000000, 129e6}},
		{"+1", "+64Mi", applied{100000, 64 << 20}},
		{"10m", "6Mi", applied{1000, 6 << 20}},
		{"0.01", "6291456", applied{1000, 6 << 20}},
		{"1.5", "1.5Gi", applied{150000, 3 << 29}},
		{"2", "1e9", applied{200000, 1e9}},
		{"", "99999999999Ei", applied{0, 1<<63 - 1}},
		{"1m", "", applied{}},
		{"9m", "", applied{}},
		{"0.009", "", applied{}},
		{"", "1m", applied{}},
		{"", "4Ki", applied{}},
		{"", "6291455", applied{}},
		{"0", "", applied{}},
		{"-1", "", applied{}},
		{"", "-64Mi", applied{}},
		{"lots", "", applied{}},
		{"", "1e3Mi", applied{}},
		{"2147483648m", "", applied{}},
		{"1e-2147483647", "", applied{}},
		{"", "1e999", applied{}},
	} {
		sb := newSandbox("q" + strings.Repeat("x", i))
		sb.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: tc.cpu, MemoryLimit: tc.mem}
		_, verr := d.ValidateSandboxCreate(ctx, &pb.ValidateSandboxCreateRequest{Sandbox: sb})
		_, cerr := d.CreateSandbox(ctx, &pb.CreateSandboxRequest{Sandbox: sb})
		if status.Code(verr) != status.Code(cerr) || status.Convert(verr).Message() != status.Convert(cerr).Message() {
			t.Errorf("cpu %q memory %q: Validate %v, Create %v", tc.cpu, tc.mem, verr, cerr)
			continue
		}
		if tc.want == (applied{}) {
			if status.Code(verr) != codes.FailedPrecondition {
				t.Errorf("cpu %q memory %q: %v, want FailedPrecondition", tc.cpu, tc.mem, verr)
			}
			continue
		}
		if verr != nil {
			t.Errorf("cpu %q memory %q: %v", tc.cpu, tc.mem, verr)
			continue
		}
		spec, err := runtime.LoadBundle(d.bundleDir(sb.GetId()))
		if err != nil {
			t.Fatal(err)
		}
		var got applied
		if r := spec.Linux.Resources; r != nil {
			if r.CPU != nil && r.CPU.Quota != nil {
				got.quota = *r.CPU.Quota
				if *r.CPU.Period != cpuPeriod {
					t.Errorf("period %d", *r.CPU.Period)
				}
			}
			if r.Memory != nil && r.Memory.Limit != nil {
				got.mem = *r.Memory.Limit
			}
		}
		if got != tc.want {
			t.Errorf("cpu %q memory %q: applied %+v, want %+v", tc.cpu, tc.mem, got, tc.want)
		}
	}
}
