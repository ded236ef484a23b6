//go:build linux

package linux

import (
	"os"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runtime"
)

// TestReadmeFeaturesTable keeps the README's conformance table and the
// features document in agreement.
func TestReadmeFeaturesTable(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	begin, end := strings.Index(s, "<!-- features-table: begin -->"), strings.Index(s, "<!-- features-table: end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no features table markers")
	}
	rows := map[string]string{}
	for _, l := range strings.Split(s[begin:end], "\n") {
		cells := strings.Split(strings.Trim(l, "| "), "|")
		if len(cells) == 2 {
			rows[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[1])
		}
	}
	r, err := New(runtime.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.Features()
	if err != nil {
		t.Fatal(err)
	}
	yes := func(b *bool) bool { return b != nil && *b }
	if !yes(f.Linux.Seccomp.Enabled) {
		t.Skip("built without the seccomp tag: the README describes the release build (make, or go test -tags seccomp)")
	}
	check := func(row string, ok bool) {
		t.Helper()
		got, present := rows[row]
		if !present {
			t.Errorf("README table lacks row %q", row)
			return
		}
		if strings.HasPrefix(got, "yes") != ok {
			t.Errorf("README row %q says %q, features says %v", row, got, ok)
		}
	}
	if got, want := rows["namespaces"], strings.Join(f.Linux.Namespaces, ", "); got != want {
		t.Errorf("README namespaces %q, features %q", got, want)
	}
	if got, want := rows["hooks"], strings.Join(f.Hooks, ", "); got != want {
		t.Errorf("README hooks %q, features %q", got, want)
	}
	check("seccomp", yes(f.Linux.Seccomp.Enabled))
	check("cgroup v1", yes(f.Linux.Cgroup.V1))
	check("cgroup v2", yes(f.Linux.Cgroup.V2))
	check("systemd cgroup driver", yes(f.Linux.Cgroup.Systemd))
	check("AppArmor", yes(f.Linux.Apparmor.Enabled))
	check("SELinux", yes(f.Linux.Selinux.Enabled))
	check("Intel RDT", yes(f.Linux.IntelRdt.Enabled))
	check("idmapped mounts", yes(f.Linux.MountExtensions.IDMap.Enabled))
	check("net devices", yes(f.Linux.NetDevices.Enabled))
	check("checkpoint/restore", f.Annotations[AnnotationCheckpoint] == "true")
}
