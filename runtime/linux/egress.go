//go:build linux

package linux

import (
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/egress"
	"github.com/skillrun/skillrun/runtime"
)

// egressHookTimeout bounds the egress hook (it waits for the host side at
// most egress's own handoff timeout).
const egressHookTimeout = 15 * time.Second

// addEgressHook makes the egress hook the container's first
// createContainer hook when sock is set: libcontainer runs it in the
// container's namespaces, as its root, after the mounts and before
// pivot_root and before any of the container's code, so a sandbox never
// runs without its sockets handed over. A spec asking for an allowlist
// without a socket, or an allowlist without a network namespace of its
// own, is refused: it would run with no filter or no network namespace.
func addEgressHook(config *configs.Config, spec *specs.Spec, sock string) error {
	allow := spec.Annotations[runtime.AnnotationNetworkAllow]
	if sock == "" {
		if allow != "" {
			return fmt.Errorf("annotation %s: the network allowlist needs an egress server, and none was started for this container", runtime.AnnotationNetworkAllow)
		}
		return nil
	}
	if !config.Namespaces.Contains(configs.NEWNET) || config.Namespaces.PathOf(configs.NEWNET) != "" {
		return errors.New("network allowlist: the container needs a new network namespace of its own (linux.namespaces: network, without a path)")
	}
	t := egressHookTimeout
	hook := configs.NewCommandHook(&configs.Command{
		Path:    "/proc/self/exe",
		Args:    []string{"skillrun-egress-hook", egress.HookArg, sock},
		Env:     []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Timeout: &t,
	})
	if config.Hooks == nil {
		config.Hooks = configs.Hooks{}
	}
	config.Hooks[configs.CreateContainer] = append(configs.HookList{hook}, config.Hooks[configs.CreateContainer]...)
	return nil
}
