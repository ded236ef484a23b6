//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// HookStateArg is the first argument of `skillrun HookStateArg STATUS PATH
// ARGS...`: the hook shim. libcontainer hands prestart hooks the state
// with status "creating"; the runtime-spec's validation suite (and crun)
// want "created" there. libcontainer runs prestart hooks itself, between
// the container's mounts and its pivot_root, a moment skillrun cannot
// reach from outside; so each prestart hook is wrapped in this binary,
// which rewrites the status in the state on its stdin and execs the real
// hook in its own place (same PID, so libcontainer's hook timeout still
// kills the hook).
const HookStateArg = "__skillrun-hook-state"

// maxHookState bounds the state document the shim reads.
const maxHookState = 4 << 20

// shimPrestart wraps config's prestart hooks in the hook shim. It runs
// the shim through /proc/self/exe: prestart hooks run in this process
// during create, so that is this binary.
func shimPrestart(config *configs.Config) {
	list := config.Hooks[configs.Prestart]
	for i, h := range list {
		ch, ok := h.(configs.CommandHook)
		if !ok || ch.Command == nil {
			continue
		}
		// A hook that cannot be executed is left as it is, so that its
		// error reads as libcontainer's (and runc's): fork/exec PATH: ...
		if err := unix.Access(ch.Command.Path, unix.X_OK); err != nil {
			continue
		}
		orig := *ch.Command
		argv := orig.Args
		if len(argv) == 0 {
			argv = []string{orig.Path}
		}
		shim := orig
		shim.Path = "/proc/self/exe"
		shim.Args = append([]string{"skillrun-hook", HookStateArg, string(specs.StateCreated), orig.Path}, argv...)
		list[i] = configs.NewCommandHook(&shim)
	}
}

// HookShim is the shim's body, args being what follows HookStateArg:
// STATUS PATH ARGV0 ARGS... It reads the state from stdin, sets its status,
// and execs PATH with the new state as stdin. It returns only on failure.
func HookShim(args []string, stdin io.Reader) error {
	if len(args) < 3 {
		return errors.New("hook shim: usage: STATUS PATH ARGV0 [ARGS...]")
	}
	status, path, argv := args[0], args[1], args[2:]
	data, err := io.ReadAll(io.LimitReader(stdin, maxHookState+1))
	if err != nil {
		return fmt.Errorf("hook shim: read state: %w", err)
	}
	if len(data) > maxHookState {
		return fmt.Errorf("hook shim: state larger than %d bytes", maxHookState)
	}
	state, err := withStatus(data, status)
	if err != nil {
		return fmt.Errorf("hook shim: %w", err)
	}
	// A memfd, not a pipe: a state of any size is there before the exec,
	// and the hook reads it like a file.
	fd, err := unix.MemfdCreate("hook-state", 0)
	if err != nil {
		return fmt.Errorf("hook shim: %w", err)
	}
	f := os.NewFile(uintptr(fd), "hook-state")
	if _, err := f.Write(state); err != nil {
		return fmt.Errorf("hook shim: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hook shim: %w", err)
	}
	if err := unix.Dup3(fd, 0, 0); err != nil {
		return fmt.Errorf("hook shim: stdin: %w", err)
	}
	f.Close()
	if err := unix.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("hook shim: exec %s: %w", path, err)
	}
	return nil
}

// withStatus returns the state document data with its "status" set,
// every other field kept as it was.
func withStatus(data []byte, status string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, fmt.Errorf("state on stdin is not a JSON object: %v", err)
	}
	s, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	m["status"] = s
	return json.Marshal(m)
}
