// Command supervisor stands in for OpenShell's sandbox supervisor in the
// openshell driver tests: it records what it was given (arguments,
// environment, the token file's mode and content, whether its own binary
// can be changed) and what the real supervisor's setup needs of its
// container (dropping to another user, creating namespaces and mounting in
// them, chown; keyctl, which Docker's seccomp profile denies) in
// <workdir>/supervisor.json, then waits for SIGTERM.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	workdir := ""
	if len(os.Args) == 3 && os.Args[1] == "--workdir" {
		workdir = os.Args[2]
	}
	rec := map[string]any{"args": os.Args, "env": os.Environ(), "pid": os.Getpid()}
	if tf := os.Getenv("OPENSHELL_SANDBOX_TOKEN_FILE"); tf != "" {
		if fi, err := os.Stat(tf); err == nil {
			rec["token_mode"] = fmt.Sprintf("%o", fi.Mode().Perm())
		}
		data, err := os.ReadFile(tf)
		rec["token"], rec["token_err"] = string(data), fmt.Sprint(err)
	}
	rec["self_write_err"] = fmt.Sprint(os.Chmod(os.Args[0], 0o777))
	// drop_privileges(): setgid/setuid to the sandbox user.
	setuid := exec.Command("/bin/busybox", "id", "-u")
	setuid.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := setuid.CombinedOutput()
	rec["setuid_out"], rec["setuid_err"] = strings.TrimSpace(string(out)), fmt.Sprint(err)
	// The agent's namespaces: new mount and network namespaces, a mount.
	ns := exec.Command("/bin/busybox", "mount", "-t", "tmpfs", "probe", "/tmp")
	ns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}
	out, err = ns.CombinedOutput()
	rec["netns_mount_err"] = fmt.Sprint(err, " ", strings.TrimSpace(string(out)))
	// prepare_filesystem(): chown to the sandbox user.
	probe := filepath.Join(workdir, "chown-probe")
	os.WriteFile(probe, nil, 0o644)
	rec["chown_err"] = fmt.Sprint(os.Chown(probe, 65534, 65534))
	os.Remove(probe)
	_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	rec["keyctl_err"] = fmt.Sprint(err)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	data, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(workdir, "supervisor.json"), data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	fmt.Println("supervisor: ready")
	<-sigs
	fmt.Println("supervisor: terminating")
}
