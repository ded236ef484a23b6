//go:build linux

package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AnnotationExeSeal in the features document says how libcontainer
// protects the runtime's binary from the containers it starts: "overlay"
// (a read-only overlayfs view, nearly free), or "memfd: WHY" (a sealed copy
// of the whole binary for every container: tens of milliseconds each).
const AnnotationExeSeal = "run.skillrun.exe-seal"

// exeSeal says how libcontainer will seal this binary for a container
// whose state lives below root, and why when it must copy it:
// libcontainer's overlayfs needs root (privileges to mount) and two
// lowerdirs that do not contain each other, the binary's folder and the
// container's state folder.
func exeSeal(root string) (how, why string) {
	exe, err := os.Executable()
	if err != nil {
		return "unknown", ""
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	dir := filepath.Dir(exe)
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	within := func(a, b string) bool { return a == b || strings.HasPrefix(a, b+string(filepath.Separator)) }
	switch {
	case os.Geteuid() != 0:
		return "memfd", "rootless: mounting the read-only overlay needs privileges"
	case within(root, dir):
		return "memfd", fmt.Sprintf("the state root %s is inside the binary's folder %s", root, dir)
	case within(dir, root):
		return "memfd", fmt.Sprintf("the binary's folder %s is inside the state root %s", dir, root)
	}
	return "overlay", ""
}

// exeSealWarning is the warning New gives once when every container of
// this root would copy the binary into a sealed memfd although an overlay
// could protect it ("" when there is nothing the caller can change).
func exeSealWarning(root string) string {
	how, why := exeSeal(root)
	if how != "memfd" || os.Geteuid() != 0 {
		return ""
	}
	size := "the whole binary"
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			size = fmt.Sprintf("the whole binary (%d MB)", fi.Size()>>20)
		}
	}
	return fmt.Sprintf("%s: libcontainer cannot protect the binary with a read-only overlay and copies %s into a sealed memfd for every container (about 20 ms of CPU each); keep the state root and the binary in folders apart (e.g. --root /run/skillrun)", why, size)
}
