//go:build linux

package linux

import (
	"errors"

	"github.com/opencontainers/cgroups"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// applyResources overlays the set fields of an OCI resources update on the
// container's cgroup resources, as runc update does: unset fields keep
// their current value, and a lone CPU quota or period keeps its partner.
func applyResources(dst *cgroups.Resources, r *specs.LinuxResources) error {
	if r == nil {
		return errors.New("resources: empty update")
	}
	if m := r.Memory; m != nil {
		if m.Limit != nil {
			dst.Memory = *m.Limit
		}
		if m.Reservation != nil {
			dst.MemoryReservation = *m.Reservation
		}
		if m.Swap != nil {
			dst.MemorySwap = *m.Swap
		}
		if m.CheckBeforeUpdate != nil {
			dst.MemoryCheckBeforeUpdate = *m.CheckBeforeUpdate
		}
	}
	if c := r.CPU; c != nil {
		if c.Shares != nil {
			dst.CpuShares = *c.Shares
			dst.CpuWeight = cgroups.ConvertCPUSharesToCgroupV2Value(*c.Shares)
		}
		if c.Quota != nil {
			dst.CpuQuota = *c.Quota
		}
		if c.Period != nil {
			dst.CpuPeriod = *c.Period
		}
		if c.Burst != nil {
			dst.CpuBurst = c.Burst
		}
		if c.RealtimePeriod != nil {
			dst.CpuRtPeriod = *c.RealtimePeriod
		}
		if c.RealtimeRuntime != nil {
			dst.CpuRtRuntime = *c.RealtimeRuntime
		}
		if c.Cpus != "" {
			dst.CpusetCpus = c.Cpus
		}
		if c.Mems != "" {
			dst.CpusetMems = c.Mems
		}
		if c.Idle != nil {
			dst.CPUIdle = c.Idle
		}
	}
	if r.Pids != nil && r.Pids.Limit != nil {
		l := *r.Pids.Limit
		dst.PidsLimit = &l
	}
	if b := r.BlockIO; b != nil {
		if b.Weight != nil {
			dst.BlkioWeight = *b.Weight
		}
		if b.LeafWeight != nil {
			dst.BlkioLeafWeight = *b.LeafWeight
		}
		for _, wd := range b.WeightDevice {
			var w, lw uint16
			if wd.Weight != nil {
				w = *wd.Weight
			}
			if wd.LeafWeight != nil {
				lw = *wd.LeafWeight
			}
			dst.BlkioWeightDevice = append(dst.BlkioWeightDevice, cgroups.NewWeightDevice(wd.Major, wd.Minor, w, lw))
		}
		for _, t := range b.ThrottleReadBpsDevice {
			dst.BlkioThrottleReadBpsDevice = append(dst.BlkioThrottleReadBpsDevice, cgroups.NewThrottleDevice(t.Major, t.Minor, t.Rate))
		}
		for _, t := range b.ThrottleWriteBpsDevice {
			dst.BlkioThrottleWriteBpsDevice = append(dst.BlkioThrottleWriteBpsDevice, cgroups.NewThrottleDevice(t.Major, t.Minor, t.Rate))
		}
		for _, t := range b.ThrottleReadIOPSDevice {
			dst.BlkioThrottleReadIOPSDevice = append(dst.BlkioThrottleReadIOPSDevice, cgroups.NewThrottleDevice(t.Major, t.Minor, t.Rate))
		}
		for _, t := range b.ThrottleWriteIOPSDevice {
			dst.BlkioThrottleWriteIOPSDevice = append(dst.BlkioThrottleWriteIOPSDevice, cgroups.NewThrottleDevice(t.Major, t.Minor, t.Rate))
		}
	}
	if len(r.Unified) > 0 {
		if dst.Unified == nil {
			dst.Unified = map[string]string{}
		}
		for k, v := range r.Unified {
			dst.Unified[k] = v
		}
	}
	// runc update never changes device rules.
	dst.SkipDevices = true
	return nil
}
