//go:build linux

package linux

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/types"

	"github.com/skillrun/skillrun/runtime"
)

// Events implements runtime.Runtime with runc's semantics: --stats prints
// one stats event; otherwise a stats event every interval and an "oom"
// event whenever the OOM killer fires, until the container's cgroup goes
// away or ctx ends.
func (r *Runtime) Events(ctx context.Context, id string, o runtime.EventsOpts, emit func(runtime.Event) error) error {
	c, err := r.load(id)
	if err != nil {
		return err
	}
	status, err := c.Status()
	if err != nil {
		return mapErr(err)
	}
	if status == libcontainer.Stopped {
		return fmt.Errorf("container with id %s is not running", id)
	}
	stats := func() error {
		s, err := c.Stats()
		if err != nil {
			return mapErr(err)
		}
		return emit(runtime.Event{Type: "stats", ID: id, Data: convertStats(s)})
	}
	if o.Stats {
		return stats()
	}
	if o.Interval <= 0 {
		return errors.New("duration interval must be greater than 0")
	}
	oom, err := c.NotifyOOM()
	if err != nil {
		return mapErr(err)
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-oom:
			if !ok {
				return nil // the cgroup is gone: the container stopped
			}
			if err := emit(runtime.Event{Type: "oom", ID: id}); err != nil {
				return err
			}
		case <-tick.C:
			if err := stats(); err != nil {
				return err
			}
		}
	}
}

// convertStats turns libcontainer's stats into runc's events types, so the
// JSON is what runc prints.
func convertStats(ls *libcontainer.Stats) *types.Stats {
	cg := ls.CgroupStats
	if cg == nil {
		return nil
	}
	var s types.Stats
	s.Pids.Current = cg.PidsStats.Current
	s.Pids.Limit = cg.PidsStats.Limit
	u := cg.CpuStats.CpuUsage
	s.CPU.Usage = types.CpuUsage{
		Kernel: u.UsageInKernelmode, User: u.UsageInUsermode, Total: u.TotalUsage,
		Percpu: u.PercpuUsage, PercpuKernel: u.PercpuUsageInKernelmode, PercpuUser: u.PercpuUsageInUsermode,
	}
	th := cg.CpuStats.ThrottlingData
	s.CPU.Throttling = types.Throttling{Periods: th.Periods, ThrottledPeriods: th.ThrottledPeriods, ThrottledTime: th.ThrottledTime}
	s.CPU.PSI = cg.CpuStats.PSI
	s.CPUSet = types.CPUSet(cg.CPUSetStats)
	m := cg.MemoryStats
	s.Memory = types.Memory{
		Cache: m.Cache, Usage: memEntry(m.Usage), Swap: memEntry(m.SwapUsage),
		Kernel: memEntry(m.KernelUsage), KernelTCP: memEntry(m.KernelTCPUsage), Raw: m.Stats, PSI: m.PSI,
	}
	b := cg.BlkioStats
	s.Blkio = types.Blkio{
		IoServiceBytesRecursive: blkio(b.IoServiceBytesRecursive),
		IoServicedRecursive:     blkio(b.IoServicedRecursive),
		IoQueuedRecursive:       blkio(b.IoQueuedRecursive),
		IoServiceTimeRecursive:  blkio(b.IoServiceTimeRecursive),
		IoWaitTimeRecursive:     blkio(b.IoWaitTimeRecursive),
		IoMergedRecursive:       blkio(b.IoMergedRecursive),
		IoTimeRecursive:         blkio(b.IoTimeRecursive),
		SectorsRecursive:        blkio(b.SectorsRecursive),
		PSI:                     b.PSI,
	}
	s.Hugetlb = make(map[string]types.Hugetlb, len(cg.HugetlbStats))
	for k, v := range cg.HugetlbStats {
		s.Hugetlb[k] = types.Hugetlb{Usage: v.Usage, Max: v.MaxUsage, Failcnt: v.Failcnt}
	}
	for _, iface := range ls.Interfaces {
		s.NetworkInterfaces = append(s.NetworkInterfaces, &types.NetworkInterface{
			Name: iface.Name, RxBytes: iface.RxBytes, RxPackets: iface.RxPackets, RxErrors: iface.RxErrors,
			RxDropped: iface.RxDropped, TxBytes: iface.TxBytes, TxPackets: iface.TxPackets,
			TxErrors: iface.TxErrors, TxDropped: iface.TxDropped,
		})
	}
	return &s
}

func memEntry(e cgroups.MemoryData) types.MemoryEntry {
	return types.MemoryEntry{Limit: e.Limit, Usage: e.Usage, Max: e.MaxUsage, Failcnt: e.Failcnt}
}

func blkio(in []cgroups.BlkioStatEntry) []types.BlkioEntry {
	out := make([]types.BlkioEntry, len(in))
	for i, e := range in {
		out[i] = types.BlkioEntry{Major: e.Major, Minor: e.Minor, Op: e.Op, Value: e.Value}
	}
	return out
}
