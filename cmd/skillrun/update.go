package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/urfave/cli/v2"
)

func updateCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "update container resource constraints",
		ArgsUsage: "<container-id>",
		Description: joinLines(
			`The update command changes the resource limits of a running container, from`,
			`a runtime-spec LinuxResources JSON (--resources FILE, or - for stdin) or the`,
			`single-value flags. Fields not given keep their value.`),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "resources", Aliases: []string{"r"}, Usage: "path to a file containing the resources to update or '-' to read from the standard input"},
			&cli.StringFlag{Name: "blkio-weight", Usage: "Specifies per cgroup weight, range is from 10 to 1000"},
			&cli.StringFlag{Name: "cpu-period", Usage: "CPU CFS period to be used for hardcapping (in usecs). 0 to use system default"},
			&cli.StringFlag{Name: "cpu-quota", Usage: "CPU CFS hardcap limit (in usecs). Allowed cpu time in a given period"},
			&cli.StringFlag{Name: "cpu-burst", Usage: "CPU CFS hardcap burst limit (in usecs). Allowed accumulated cpu time additionally for burst a given period"},
			&cli.StringFlag{Name: "cpu-share", Usage: "CPU shares (relative weight vs. other containers)"},
			&cli.StringFlag{Name: "cpu-rt-period", Usage: "CPU realtime period to be used for hardcapping (in usecs). 0 to use system default"},
			&cli.StringFlag{Name: "cpu-rt-runtime", Usage: "CPU realtime hardcap limit (in usecs). Allowed cpu time in a given period"},
			&cli.StringFlag{Name: "cpuset-cpus", Usage: "CPU(s) to use"},
			&cli.StringFlag{Name: "cpuset-mems", Usage: "Memory node(s) to use"},
			&cli.StringFlag{Name: "memory", Usage: "Memory limit (in bytes, or with a unit: 512m)"},
			&cli.StringFlag{Name: "memory-reservation", Usage: "Memory reservation or soft_limit (in bytes)"},
			&cli.StringFlag{Name: "memory-swap", Usage: "Total memory usage (memory + swap); set '-1' to enable unlimited swap"},
			&cli.Int64Flag{Name: "pids-limit", Usage: "Maximum number of pids allowed in the container"},
		},
		Action: func(c *cli.Context) error {
			if err := checkArgs(c, 1, 1); err != nil {
				return err
			}
			r, err := e.resourcesFromFlags(c)
			if err != nil {
				return err
			}
			rt, err := e.engine(c)
			if err != nil {
				return err
			}
			return rt.Update(c.Context, c.Args().First(), r)
		},
	}
}

// resourcesFromFlags reads --resources, else the single-value flags.
func (e *env) resourcesFromFlags(c *cli.Context) (*specs.LinuxResources, error) {
	var r specs.LinuxResources
	if path := c.String("resources"); path != "" {
		var in io.Reader = e.stdin
		if path != "-" {
			f, err := os.Open(path)
			if err != nil {
				return nil, fmt.Errorf("--resources: %w", err)
			}
			defer f.Close()
			in = f
		}
		if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&r); err != nil {
			return nil, fmt.Errorf("--resources %s: invalid LinuxResources JSON: %w", path, err)
		}
		return &r, nil
	}
	u64 := func(name string) (*uint64, error) {
		if !c.IsSet(name) {
			return nil, nil
		}
		v, err := strconv.ParseUint(c.String(name), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s: invalid value %q: %w", name, c.String(name), err)
		}
		return &v, nil
	}
	i64 := func(name string) (*int64, error) {
		if !c.IsSet(name) {
			return nil, nil
		}
		v, err := strconv.ParseInt(c.String(name), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--%s: invalid value %q: %w", name, c.String(name), err)
		}
		return &v, nil
	}
	bytes := func(name string) (*int64, error) {
		if !c.IsSet(name) {
			return nil, nil
		}
		s := c.String(name)
		if s == "-1" {
			v := int64(-1)
			return &v, nil
		}
		v, err := units.RAMInBytes(s)
		if err != nil {
			return nil, fmt.Errorf("--%s: invalid value %q: %w", name, s, err)
		}
		return &v, nil
	}
	cpu := &specs.LinuxCPU{Cpus: c.String("cpuset-cpus"), Mems: c.String("cpuset-mems")}
	mem := &specs.LinuxMemory{}
	var err error
	var errs []error
	set := func(e error) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	cpu.Period, err = u64("cpu-period")
	set(err)
	cpu.Quota, err = i64("cpu-quota")
	set(err)
	cpu.Burst, err = u64("cpu-burst")
	set(err)
	cpu.Shares, err = u64("cpu-share")
	set(err)
	cpu.RealtimePeriod, err = u64("cpu-rt-period")
	set(err)
	cpu.RealtimeRuntime, err = i64("cpu-rt-runtime")
	set(err)
	mem.Limit, err = bytes("memory")
	set(err)
	mem.Reservation, err = bytes("memory-reservation")
	set(err)
	mem.Swap, err = bytes("memory-swap")
	set(err)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	r.CPU, r.Memory = cpu, mem
	if c.IsSet("blkio-weight") {
		w, err := strconv.ParseUint(c.String("blkio-weight"), 10, 16)
		if err != nil {
			return nil, fmt.Errorf("--blkio-weight: invalid value %q", c.String("blkio-weight"))
		}
		w16 := uint16(w)
		r.BlockIO = &specs.LinuxBlockIO{Weight: &w16}
	}
	if c.IsSet("pids-limit") {
		l := c.Int64("pids-limit")
		r.Pids = &specs.LinuxPids{Limit: &l}
	}
	return &r, nil
}
