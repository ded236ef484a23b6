//go:build darwin

package darwin

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// sZomb is SZOMB from <sys/proc.h>: a process that exited, not yet reaped.
const sZomb = 5

// procInfo returns the start time of process pid (microseconds since the
// epoch) and whether it is a zombie; errNoProcess when there is none.
func procInfo(pid int) (startTime uint64, zombie bool, err error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return 0, false, errNoProcess
		}
		return 0, false, err
	}
	// kern.proc.pid returns an empty record for a PID that does not exist.
	if k.Proc.P_pid != int32(pid) {
		return 0, false, errNoProcess
	}
	tv := k.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec), k.Proc.P_stat == sZomb, nil
}

// groupPids returns the live (non-zombie) members of process group pgid.
func groupPids(pgid int) ([]int, error) {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, k := range ks {
		if k.Proc.P_stat != sZomb {
			out = append(out, int(k.Proc.P_pid))
		}
	}
	return out, nil
}
