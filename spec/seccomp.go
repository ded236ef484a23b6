package spec

import (
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// deniedSyscalls fail with EPERM in the sandbox: the kernel attack surface
// a skill never needs (namespaces, mounts, tracing, BPF, keyrings,
// modules, kexec, io_uring, userfaultfd, perf, clocks, swap, quotas, file
// handles, raw I/O ports, the kernel log).
var deniedSyscalls = []string{
	"_sysctl", "acct", "add_key", "adjtimex", "bpf", "chroot", "clock_adjtime", "clock_settime",
	"create_module", "delete_module", "fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"get_kernel_syms", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl",
	"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
	"name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root",
	"process_madvise", "process_vm_readv", "process_vm_writev", "ptrace", "query_module", "quotactl", "quotactl_fd",
	"reboot", "request_key", "setns", "settimeofday", "stime", "swapoff", "swapon", "syslog", "sysfs", "umount",
	"umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup", "vm86", "vm86old",
}

// Namespace flags of clone(2): clone with any of them is denied. One rule
// per flag because a rule's conditions are ANDed.
var cloneNamespaceFlags = []uint64{
	0x00020000, // CLONE_NEWNS
	0x02000000, // CLONE_NEWCGROUP
	0x04000000, // CLONE_NEWUTS
	0x08000000, // CLONE_NEWIPC
	0x10000000, // CLONE_NEWUSER
	0x20000000, // CLONE_NEWPID
	0x40000000, // CLONE_NEWNET
}

// Personality flags that weaken exploit mitigations.
var personalityFlags = []uint64{
	0x0040000, // ADDR_NO_RANDOMIZE
	0x0100000, // MMAP_PAGE_ZERO
	0x0200000, // ADDR_COMPAT_LAYOUT
	0x0400000, // READ_IMPLIES_EXEC
}

const (
	errnoEPERM  = 1
	errnoENOSYS = 38
)

// seccompArchitectures lists the one ABI the filter admits: the native
// ABI of a Go architecture. The 32-bit compat entry points (int 0x80 on
// x86_64, AArch32 on arm64) and x32 are left out on purpose: a syscall
// through an ABI the filter does not list meets libseccomp's bad-arch
// action, which kills the thread. Skills run the host's 64-bit
// interpreters; the compat ABIs are kernel attack surface they never
// use, and one ABI instead of three also makes the filter three times
// smaller to build and to run (about 1 ms less per start here).
func seccompArchitectures(goarch string) []specs.Arch {
	switch goarch {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64}
	case "386":
		return []specs.Arch{specs.ArchX86}
	case "arm":
		return []specs.Arch{specs.ArchARM}
	case "riscv64":
		return []specs.Arch{specs.ArchRISCV64}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X}
	}
	return nil
}

// Seccomp returns the skill sandbox's seccomp filter for a Go
// architecture: allow by default, EPERM for the denied list, clone with
// namespace flags, personality flags that disable ASLR or NX, TIOCSTI and
// TIOCLINUX ioctls, AF_PACKET, AF_VSOCK and SOCK_RAW sockets; clone3 fails with
// ENOSYS (its flags are in memory a filter cannot read) so libcs fall
// back to clone, whose flags are filtered.
func Seccomp(goarch string) *specs.LinuxSeccomp {
	eperm := uint(errnoEPERM)
	enosys := uint(errnoENOSYS)
	names := append([]string(nil), deniedSyscalls...)
	sort.Strings(names)
	s := &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchitectures(goarch),
		Syscalls: []specs.LinuxSyscall{
			{Names: names, Action: specs.ActErrno, ErrnoRet: &eperm},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
	// s390x passes clone's flags second.
	flagsArg := uint(0)
	if goarch == "s390x" {
		flagsArg = 1
	}
	for _, f := range cloneNamespaceFlags {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: flagsArg, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	for _, f := range personalityFlags {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"personality"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: f, ValueTwo: f, Op: specs.OpMaskedEqual}},
		})
	}
	// ioctl's request is an unsigned int: compare only the low 32 bits so
	// garbage in the upper half cannot slip past the rule.
	for _, req := range []uint64{0x5412 /* TIOCSTI */, 0x541C /* TIOCLINUX */} {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"ioctl"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: 0xffffffff, ValueTwo: req, Op: specs.OpMaskedEqual}},
		})
	}
	s.Syscalls = append(s.Syscalls,
		specs.LinuxSyscall{ // AF_PACKET
			Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0xffffffff, ValueTwo: 17, Op: specs.OpMaskedEqual}},
		},
		specs.LinuxSyscall{ // SOCK_RAW, whatever SOCK_NONBLOCK/SOCK_CLOEXEC
			Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: 0xf, ValueTwo: 3, Op: specs.OpMaskedEqual}},
		},
		specs.LinuxSyscall{ // AF_VSOCK: not namespaced; reaches the hypervisor and the host's VM services
			Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0xffffffff, ValueTwo: 40, Op: specs.OpMaskedEqual}},
		},
		specs.LinuxSyscall{ // SOCK_PACKET: the obsolete AF_INET form of a packet socket
			Names: []string{"socket"}, Action: specs.ActErrno, ErrnoRet: &eperm,
			Args: []specs.LinuxSeccompArg{{Index: 1, Value: 0xf, ValueTwo: 10, Op: specs.OpMaskedEqual}},
		},
	)
	return s
}
