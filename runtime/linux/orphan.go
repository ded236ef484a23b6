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

	"github.com/skillrun/skillrun/internal/safefs"
)

// cgroupFile records, in a new container's state directory, where
// libcontainer is about to create the container's cgroups. libcontainer
// writes state.json only once the init has started; a create killed
// before then leaves a state directory libcontainer cannot load and
// cgroups nobody would remove. delete (and delete --force) use this record
// to remove them.
const cgroupFile = "skillrun-cgroup.json"

// cgroupRecord is what locates the cgroups: the fields of the cgroup
// config that name them (resolved into paths when needed, which costs
// parsing mountinfo: not on the create path).
type cgroupRecord struct {
	Path        string `json:"path,omitempty"`
	Name        string `json:"name,omitempty"`
	Parent      string `json:"parent,omitempty"`
	ScopePrefix string `json:"scope_prefix,omitempty"`
	Systemd     bool   `json:"systemd,omitempty"`
	Rootless    bool   `json:"rootless,omitempty"`
}

// recordCgroups writes the record for cg into stateDir.
func recordCgroups(stateDir string, cg *cgroups.Cgroup) error {
	if cg == nil {
		return nil
	}
	data, err := json.Marshal(cgroupRecord{
		Path: cg.Path, Name: cg.Name, Parent: cg.Parent,
		ScopePrefix: cg.ScopePrefix, Systemd: cg.Systemd, Rootless: cg.Rootless,
	})
	if err != nil {
		return fmt.Errorf("record cgroups: %w", err)
	}
	if err := safefs.WriteFileAtomic(filepath.Join(stateDir, cgroupFile), data, 0o600); err != nil {
		return fmt.Errorf("record cgroups: %w", err)
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
		if json.Unmarshal(data, &rec) == nil && (rec.Path != "" || rec.Name != "") {
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
//
// A relative cgroup path resolves against the deleting process' own
// cgroups, as it did against the creating one's: the same place when both
// run in the same service or session, which is how skillrun is used.
func destroyCgroups(rec cgroupRecord) error {
	m, err := manager.New(&cgroups.Cgroup{
		Path: rec.Path, Name: rec.Name, Parent: rec.Parent,
		ScopePrefix: rec.ScopePrefix, Systemd: rec.Systemd, Rootless: rec.Rootless,
		Resources: &cgroups.Resources{},
	})
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
