package spec

import (
	"errors"
	"io/fs"
)

// HostDevDir is where the skill runner keeps the sandbox's /dev: the
// device nodes the OCI runtime spec requires and the links a Linux
// userland expects, made once per host by root. A skill's /dev is a
// read-only bind of it instead of a tmpfs that the runtime fills with a
// bind mount per device (in a user namespace devices cannot be created):
// one mount instead of seven, ~1 ms of every start. /dev/pts and /dev/shm
// are still the sandbox's own mounts, on the two mount points it holds.
// The folder must be on a filesystem mounted without nodev.
const HostDevDir = "/var/lib/skillrun/dev"

// devEntry is one entry of the device folder: a character device (major,
// minor, mode 0666), a directory (mount point, 0755) or a symbolic link.
type devEntry struct {
	name         string
	mode         fs.FileMode // type bits: fs.ModeCharDevice|fs.ModeDevice, fs.ModeDir or fs.ModeSymlink
	major, minor uint32
	target       string
}

// devEntries is the whole folder, nothing more: the devices of the OCI
// runtime spec's default set (runtime-spec config-linux.md, "Default
// Devices"; /dev/ptmx as the link to the sandbox's devpts instance), the
// mount points of the sandbox's /dev/pts and /dev/shm, and the /dev/fd and
// standard-stream links runc makes.
var devEntries = []devEntry{
	{name: "null", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 3},
	{name: "zero", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 5},
	{name: "full", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 7},
	{name: "random", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 8},
	{name: "urandom", mode: fs.ModeDevice | fs.ModeCharDevice, major: 1, minor: 9},
	{name: "tty", mode: fs.ModeDevice | fs.ModeCharDevice, major: 5, minor: 0},
	{name: "pts", mode: fs.ModeDir},
	{name: "shm", mode: fs.ModeDir},
	{name: "ptmx", mode: fs.ModeSymlink, target: "pts/ptmx"},
	{name: "fd", mode: fs.ModeSymlink, target: "/proc/self/fd"},
	{name: "stdin", mode: fs.ModeSymlink, target: "/proc/self/fd/0"},
	{name: "stdout", mode: fs.ModeSymlink, target: "/proc/self/fd/1"},
	{name: "stderr", mode: fs.ModeSymlink, target: "/proc/self/fd/2"},
}

// ErrDevDirUnsupported: the device folder cannot be made or used on this
// platform.
var ErrDevDirUnsupported = errors.New("device folder: not supported on this platform")

// WithDevDir makes a Linux spec's /dev a read-only bind of dir, a folder
// that EnsureDevDir or CheckDevDir accepted, instead of a tmpfs the
// runtime fills with the default devices.
func WithDevDir(dir string) Option { return func(o *options) { o.devDir = dir } }
