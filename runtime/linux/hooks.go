//go:build linux

package linux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/skillrun/skillrun/internal/safefs"
)

// hooksFile keeps a container's poststart and poststop hooks in its state
// directory: skillrun, not libcontainer, runs them.
const hooksFile = "skillrun-hooks.json"

// The runtime-spec says poststart hooks run after the user process has
// been executed, before `start` returns, and that a failing poststart or
// poststop hook only logs a warning while the remaining hooks and the
// lifecycle continue. libcontainer v1.5 runs poststart at the end of
// `create` and destroys the container when one fails, and stops at the
// first failing poststop hook and fails the delete (runc does the same).
// So skillrun takes both lists out of libcontainer's config and runs them
// itself, each hook in order, a failure being a warning.

// takeHooks removes the poststart and poststop hooks from config and
// returns them.
func takeHooks(config *configs.Config) configs.Hooks {
	if config.Hooks == nil {
		return nil
	}
	h := configs.Hooks{}
	for _, name := range []configs.HookName{configs.Poststart, configs.Poststop} {
		if l := config.Hooks[name]; len(l) > 0 {
			h[name] = l
		}
		delete(config.Hooks, name)
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// saveHooks records hooks in the state directory.
func saveHooks(stateDir string, hooks configs.Hooks) error {
	if len(hooks) == 0 {
		return nil
	}
	data, err := json.Marshal(hooks)
	if err != nil {
		return fmt.Errorf("save hooks: %w", err)
	}
	if err := safefs.WriteFileAtomic(filepath.Join(stateDir, hooksFile), data, 0o600); err != nil {
		return fmt.Errorf("save hooks: %w", err)
	}
	return nil
}

// loadHooks reads what saveHooks recorded (nil if nothing).
func loadHooks(stateDir string) (configs.Hooks, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, hooksFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load hooks: %w", err)
	}
	var h configs.Hooks
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("load hooks: %w", err)
	}
	return h, nil
}

// runHooks runs each hook of the list with st on stdin; a failure is a
// warning and the next hook still runs.
func runHooks(name configs.HookName, list configs.HookList, st *specs.State, warn func(string)) {
	for i, h := range list {
		if err := h.Run(st); err != nil {
			warn(fmt.Sprintf("%s hook #%d failed (the lifecycle continues): %v", name, i, err))
		}
	}
}

// runPoststart runs the poststart hooks with the container's state.
func runPoststart(c *libcontainer.Container, hooks configs.Hooks, warn func(string)) {
	list := hooks[configs.Poststart]
	if len(list) == 0 {
		return
	}
	st, err := c.OCIState()
	if err != nil {
		warn(fmt.Sprintf("poststart hooks not run: %v", err))
		return
	}
	st.Status = specs.StateRunning
	waitExecuted(st.Pid)
	runHooks(configs.Poststart, list, st, warn)
}

// waitExecuted waits, at most a second, until the init has replaced
// itself with the user's program: start returns once the init was
// released, a moment before its execve. Only containers with poststart
// hooks wait; no kernel event reports an execve to another process, so
// this backs off from 100 µs.
func waitExecuted(pid int) {
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	delay := 100 * time.Microsecond
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); delay *= 2 {
		data, err := os.ReadFile(stat)
		if err != nil || !bytes.Contains(data, []byte("(runc:[2:INIT])")) {
			return
		}
		time.Sleep(min(delay, 20*time.Millisecond))
	}
}

// destroyContainer removes the container and then runs its poststop hooks with
// its last state (status "stopped").
func destroyContainer(c *libcontainer.Container, stateDir string, warn func(string)) error {
	hooks, herr := loadHooks(stateDir)
	list := hooks[configs.Poststop]
	if len(list) == 0 && herr == nil {
		return c.Destroy()
	}
	st, serr := c.OCIState()
	if err := c.Destroy(); err != nil {
		return err
	}
	if herr != nil || serr != nil {
		warn(fmt.Sprintf("poststop hooks not run: %v", errors.Join(herr, serr)))
		return nil
	}
	st.Status = specs.StateStopped
	runHooks(configs.Poststop, list, st, warn)
	return nil
}
