package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/runtime"
)

// Validate checks that sp is a well-formed skill sandbox spec that keeps
// the hardened profile: read-only root, a process with arguments, an
// absolute cwd and KEY=VALUE environment, no capabilities,
// noNewPrivileges, absolute mount destinations and, on Linux, every
// namespace but (optionally) network, a single non-root ID mapping and a
// seccomp filter. Every problem is returned, joined, each naming its field.
func Validate(sp *specs.Spec) error {
	if sp == nil {
		return errors.New("spec: nil")
	}
	var errs []error
	fail := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if sp.Version == "" {
		fail("ociVersion", "required")
	}
	switch {
	case sp.Root == nil || sp.Root.Path == "":
		fail("root.path", "required")
	case !sp.Root.Readonly:
		fail("root.readonly", "must be true")
	}
	platform := sp.Annotations[AnnotationPlatform]
	if platform == "" {
		platform = "linux"
		if sp.Linux == nil {
			platform = "darwin"
		}
	}
	if p := sp.Process; p == nil {
		fail("process", "required")
	} else {
		if len(p.Args) == 0 || p.Args[0] == "" {
			fail("process.args", "must name a program")
		}
		if !path.IsAbs(p.Cwd) {
			fail("process.cwd", "%q must be absolute", p.Cwd)
		}
		if p.Terminal {
			fail("process.terminal", "must be false: skills talk JSON over pipes")
		}
		for i, e := range p.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				fail(fmt.Sprintf("process.env[%d]", i), "%q is not KEY=VALUE", e)
			}
		}
		if !p.NoNewPrivileges {
			fail("process.noNewPrivileges", "must be true")
		}
		if c := p.Capabilities; c != nil {
			for name, set := range map[string][]string{"bounding": c.Bounding, "effective": c.Effective, "permitted": c.Permitted, "inheritable": c.Inheritable, "ambient": c.Ambient} {
				if len(set) > 0 {
					fail("process.capabilities."+name, "must be empty, has %s", strings.Join(set, ","))
				}
			}
		} else if platform == "linux" {
			fail("process.capabilities", "must be present and empty (absent keeps the runtime's defaults)")
		}
	}
	seen := map[string]bool{}
	for i, m := range sp.Mounts {
		f := fmt.Sprintf("mounts[%d]", i)
		if !path.IsAbs(m.Destination) {
			fail(f+".destination", "%q must be absolute", m.Destination)
		}
		if seen[m.Destination] {
			fail(f+".destination", "%q is mounted twice", m.Destination)
		}
		seen[m.Destination] = true
		if runtime.IsBind(m) && m.Source == "" {
			fail(f+".source", "bind mount of %q has no source", m.Destination)
		}
		if runtime.IsBind(m) && (m.Source == "/" || path.Clean(m.Source) == "/") {
			fail(f+".source", "the host root must not be bound")
		}
	}
	if platform == "linux" {
		validateLinux(sp, fail)
	}
	return errors.Join(errs...)
}

func validateLinux(sp *specs.Spec, fail func(field, format string, a ...any)) {
	l := sp.Linux
	if l == nil {
		fail("linux", "required on linux")
		return
	}
	have := map[specs.LinuxNamespaceType]bool{}
	for _, ns := range l.Namespaces {
		if ns.Path != "" {
			fail("linux.namespaces", "%s joins an existing namespace (%s)", ns.Type, ns.Path)
		}
		have[ns.Type] = true
	}
	for _, t := range []specs.LinuxNamespaceType{specs.UserNamespace, specs.MountNamespace, specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.CgroupNamespace} {
		if !have[t] {
			fail("linux.namespaces", "%s namespace is missing", t)
		}
	}
	if !have[specs.NetworkNamespace] && sp.Annotations[AnnotationNetwork] != NetworkHost {
		fail("linux.namespaces", "network namespace is missing and annotation %s is not %q", AnnotationNetwork, NetworkHost)
	}
	for name, maps := range map[string][]specs.LinuxIDMapping{"linux.uidMappings": l.UIDMappings, "linux.gidMappings": l.GIDMappings} {
		switch {
		case len(maps) != 1:
			fail(name, "must map exactly one ID, has %d mappings", len(maps))
		case maps[0].Size != 1:
			fail(name, "must map exactly one ID, maps %d", maps[0].Size)
		case maps[0].HostID == 0:
			fail(name, "must not map to host ID 0")
		}
	}
	if l.Seccomp == nil {
		fail("linux.seccomp", "required")
	}
}
