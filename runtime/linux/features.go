//go:build linux

package linux

import (
	"fmt"
	"os"

	"github.com/opencontainers/runc/libcontainer/capabilities"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/seccomp"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/opencontainers/runtime-spec/specs-go/features"
)

// Annotations skillrun adds to its features document.
const (
	// AnnotationCgroups says whether resource limits are enforced for the
	// calling user: "enforced", or why not.
	AnnotationCgroups = "run.skillrun.cgroups"
	// AnnotationLibseccompVersion is the libseccomp linked in (runc's key).
	AnnotationLibseccompVersion = "io.github.seccomp.libseccomp.version"
	// AnnotationCheckpoint is runc's key; skillrun has no checkpoint verb.
	AnnotationCheckpoint = "org.opencontainers.runc.checkpoint.enabled"
)

// Features implements runtime.Runtime. It describes what this build and
// this caller can do: the libcontainer features compiled in, seccomp only
// when libseccomp is linked, and whether cgroup limits apply to the caller.
func (r *Runtime) Features() (*features.Features, error) {
	t, f := true, false
	feat := &features.Features{
		OCIVersionMin: "1.0.0",
		OCIVersionMax: specs.Version,
		Hooks:         configs.KnownHookNames(),
		MountOptions:  specconv.KnownMountOptions(),
		Annotations: map[string]string{
			AnnotationCheckpoint: "false",
			AnnotationCgroups:    r.cgroupSupport(),
			AnnotationExeSeal:    r.exeSealSupport(),
			// The RCU wait of the first cgroup migration (docs/performance.md).
			AnnotationFavorDynmods: favorDynmodsSupport(),
		},
		Linux: &features.Linux{
			Namespaces:   specconv.KnownNamespaces(),
			Capabilities: capabilities.KnownCapabilities(),
			Cgroup: &features.Cgroup{
				V1:          &t,
				V2:          &t,
				Systemd:     &t,
				SystemdUser: &t,
				Rdma:        &t,
			},
			Apparmor: &features.Apparmor{Enabled: &t},
			Selinux:  &features.Selinux{Enabled: &t},
			IntelRdt: &features.IntelRdt{Enabled: &t, Schemata: &t, Monitoring: &t},
			MemoryPolicy: &features.MemoryPolicy{
				Modes: specconv.KnownMemoryPolicyModes(),
				Flags: specconv.KnownMemoryPolicyFlags(),
			},
			MountExtensions: &features.MountExtensions{IDMap: &features.IDMap{Enabled: &t}},
			NetDevices:      &features.NetDevices{Enabled: &t},
			Seccomp:         &features.Seccomp{Enabled: &f},
		},
		PotentiallyUnsafeConfigAnnotations: []string{"bundle", "org.systemd.property.", "org.criu.config"},
	}
	if seccomp.Enabled {
		feat.Linux.Seccomp = &features.Seccomp{
			Enabled:        &t,
			Actions:        seccomp.KnownActions(),
			Operators:      seccomp.KnownOperators(),
			Archs:          seccomp.KnownArchs(),
			KnownFlags:     seccomp.KnownFlags(),
			SupportedFlags: seccomp.SupportedFlags(),
		}
		major, minor, patch := seccomp.Version()
		feat.Annotations[AnnotationLibseccompVersion] = fmt.Sprintf("%d.%d.%d", major, minor, patch)
	}
	return feat, nil
}

// cgroupSupport says whether linux.resources will be enforced for the
// calling user.
func (r *Runtime) cgroupSupport() string {
	if !r.rootlessCgroups || os.Geteuid() == 0 || cgroupWritable() {
		return "enforced"
	}
	return fmt.Sprintf("not delegated to uid %d: memory, cpu, pids and blockIO limits are dropped with a warning; rlimits still apply", os.Geteuid())
}

// exeSealSupport is AnnotationExeSeal's value for this state root.
func (r *Runtime) exeSealSupport() string {
	how, why := exeSeal(r.root)
	if why != "" {
		return how + ": " + why
	}
	return how
}
