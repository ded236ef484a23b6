//go:build linux

package darwin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// procStat reads the fields of /proc/PID/stat after the command name.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errNoProcess
		}
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	return strings.Fields(s[i+1:]), nil
}

// procInfo returns the start time of process pid (in clock ticks since
// boot) and whether it is a zombie; errNoProcess when there is none.
func procInfo(pid int) (startTime uint64, zombie bool, err error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, false, err
	}
	// f[0] is field 3 (state), f[19] is field 22 (starttime).
	if len(f) < 20 {
		return 0, false, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return st, f[0] == "Z" || f[0] == "X", nil
}

// groupPids returns the live (non-zombie) members of process group pgid.
func groupPids(pgid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil || len(f) < 3 {
			continue // gone meanwhile
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid && f[0] != "Z" && f[0] != "X" {
			out = append(out, pid)
		}
	}
	return out, nil
}
