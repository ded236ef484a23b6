//go:build linux

package linux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"
)

// cgroupFile records, in a new container's state directory, the cgroups
// libcontainer is about to create for it. libcontainer writes state.json
// only once the init has started; a create killed before then leaves a
// state directory libcontainer cannot load and cgroups nobody would
// remove. delete (and delete --force) use this record to remove them.
const cgroupFile = "skillrun-cgroup.json"

type cgroupRecord struct {
	Config *cgroups.Cgroup   `json:"config"`
	Paths  map[string]string `json:"paths"`
}

// recordCgroups writes the record for cg into stateDir.
func recordCgroups(stateDir string, cg *cgroups.Cgroup) error {
	if cg == nil {
		return nil
	}
	m, err := manager.New(cg)
	if err != nil {
		return fmt.Errorf("record cgroups: %w", err)
	}
	data, err := json.Marshal(cgroupRecord{Config: cg, Paths: m.GetPaths()})
	if err != nil {
		return fmt.Errorf("record cgroups: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(stateDir, cgroupFile), data); err != nil {
		return fmt.Errorf("record cgroups: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to a temporary file and renames it over
// name, so a process killed half-way leaves no partial file behind.
func writeFileAtomic(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// removeOrphan cleans up after a create that died before libcontainer
// wrote state.json: it kills what is left in the recorded cgroups (the
// half-set-up init, if it outlived its parent), removes the cgroups and
// then the state directory.
func removeOrphan(stateDir string) error {
	data, err := os.ReadFile(filepath.Join(stateDir, cgroupFile))
	var rec cgroupRecord
	switch {
	case err == nil:
		// The record is written atomically before the init starts: one
		// that does not parse was never complete, so no cgroup was made
		// after it; the directory just goes.
		if json.Unmarshal(data, &rec) == nil && rec.Config != nil && len(rec.Paths) > 0 {
			if err := destroyCgroups(rec); err != nil {
				return fmt.Errorf("orphaned container %s: %w", filepath.Base(stateDir), err)
			}
		}
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	return os.RemoveAll(stateDir)
}

// destroyCgroups kills every process of the recorded cgroups and removes
// them. The cgroups are the container's own (named after its ID), never
// the caller's.
func destroyCgroups(rec cgroupRecord) error {
	m, err := manager.NewWithPaths(rec.Config, rec.Paths)
	if err != nil {
		return err
	}
	if !m.Exists() {
		return m.Destroy() // removes what exists of the per-controller dirs
	}
	for attempt := 0; attempt < 50; attempt++ {
		pids, err := m.GetAllPids()
		if err != nil || len(pids) == 0 {
			break
		}
		_ = m.Freeze(cgroups.Thawed)
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond) // killed tasks leave the cgroup asynchronously
	}
	return m.Destroy()
}
