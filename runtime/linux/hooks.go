//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// poststartFile keeps a created container's poststart hooks in its state
// directory until start runs them.
const poststartFile = "skillrun-poststart.json"

// The runtime-spec says poststart hooks run after the user process has
// been executed, before `start` returns, and that a failing one only logs a
// warning. libcontainer v1.5 runs them at the end of `create` and destroys
// the container when one fails (runc does the same). So skillrun takes them
// out of libcontainer's config and runs them itself, at start.

// takePoststart removes the poststart hooks from config and returns them.
func takePoststart(config *configs.Config) configs.HookList {
	if config.Hooks == nil {
		return nil
	}
	hooks := config.Hooks[configs.Poststart]
	delete(config.Hooks, configs.Poststart)
	return hooks
}

// savePoststart records hooks for a later start.
func savePoststart(stateDir string, hooks configs.HookList) error {
	if len(hooks) == 0 {
		return nil
	}
	data, err := json.Marshal(configs.Hooks{configs.Poststart: hooks})
	if err != nil {
		return fmt.Errorf("save poststart hooks: %w", err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, poststartFile), data, 0o600); err != nil {
		return fmt.Errorf("save poststart hooks: %w", err)
	}
	return nil
}

// loadPoststart reads the hooks savePoststart recorded (none if absent).
func loadPoststart(stateDir string) (configs.HookList, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, poststartFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load poststart hooks: %w", err)
	}
	var h configs.Hooks
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("load poststart hooks: %w", err)
	}
	return h[configs.Poststart], nil
}

// runPoststart runs each hook with the container's state ("running") on
// stdin; a failure is a warning and the next hook still runs.
func runPoststart(c *libcontainer.Container, hooks configs.HookList, warn func(string)) {
	if len(hooks) == 0 {
		return
	}
	st, err := c.OCIState()
	if err != nil {
		warn(fmt.Sprintf("poststart hooks not run: %v", err))
		return
	}
	st.Status = specs.StateRunning
	for i, h := range hooks {
		if err := h.Run(st); err != nil {
			warn(fmt.Sprintf("poststart hook #%d failed (the container keeps running): %v", i, err))
		}
	}
}

// destroyWarnHooks destroys c. A poststop hook failure is only a warning
// (runtime-spec); libcontainer reports it as the error of a destroy that
// otherwise completed, which shows as the state directory being gone.
func destroyWarnHooks(c *libcontainer.Container, stateDir string, warn func(string)) error {
	err := c.Destroy()
	if err == nil {
		return nil
	}
	if _, serr := os.Stat(stateDir); errors.Is(serr, os.ErrNotExist) {
		warn(fmt.Sprintf("poststop hook failed (the container is deleted): %v", err))
		return nil
	}
	return err
}
