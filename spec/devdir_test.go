package spec

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func mountAt(sp *specs.Spec, dest string) *specs.Mount {
	for i := range sp.Mounts {
		if sp.Mounts[i].Destination == dest {
			return &sp.Mounts[i]
		}
	}
	return nil
}

// TestGenerateDevDir: WithDevDir makes /dev a read-only, nosuid, noexec
// bind of the folder, keeps /dev/pts and /dev/shm on it, and passes the
// profile's validation; without it /dev is the runtime's tmpfs.
func TestGenerateDevDir(t *testing.T) {
	s := loadExample(t, "calculator")
	base := []Option{WithHostLayout(testLayout), WithHostID(1000, 1000)}
	sp, err := Generate(s, "linux", base...)
	if err != nil {
		t.Fatal(err)
	}
	if m := mountAt(sp, "/dev"); m == nil || m.Type != "tmpfs" {
		t.Fatalf("/dev without WithDevDir = %+v, want the tmpfs", m)
	}
	sp, err = Generate(s, "linux", append(base, WithDevDir("/var/lib/skillrun/dev"))...)
	if err != nil {
		t.Fatal(err)
	}
	m := mountAt(sp, "/dev")
	if m == nil || m.Type != "bind" || m.Source != "/var/lib/skillrun/dev" {
		t.Fatalf("/dev with WithDevDir = %+v, want a bind of the folder", m)
	}
	for _, o := range []string{"bind", "ro", "nosuid", "noexec"} {
		if !slices.Contains(m.Options, o) {
			t.Errorf("/dev bind options %v lack %q", m.Options, o)
		}
	}
	if slices.Contains(m.Options, "nodev") || slices.Contains(m.Options, "rw") {
		t.Errorf("/dev bind options %v: devices must work, the folder must stay read-only", m.Options)
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if mountAt(sp, d) == nil {
			t.Errorf("%s is not mounted with WithDevDir", d)
		}
	}
	if err := Validate(sp); err != nil {
		t.Fatalf("spec with the device folder fails the profile: %v", err)
	}
	// Darwin has no /dev mount to replace: the option changes nothing.
	a, err := Generate(s, "darwin", WithBundleDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(s, "darwin", WithBundleDir(t.TempDir()), WithDevDir("/var/lib/skillrun/dev"))
	if err != nil {
		t.Fatal(err)
	}
	if mountAt(b, "/dev") != nil && mountAt(b, "/dev").Source == "/var/lib/skillrun/dev" {
		t.Errorf("darwin spec binds the Linux device folder: %+v (without: %+v)", mountAt(b, "/dev"), mountAt(a, "/dev"))
	}
}
