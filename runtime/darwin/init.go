//go:build darwin || linux

package darwin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/skillrun/skillrun/seatbelt"
)

// initFDsEnv names the environment variable through which create tells
// the init which descriptors carry its configuration and its status pipe
// ("CFG,SYNC"). Its absence means `skillrun init` was not started by
// create.
const initFDsEnv = "_SKILLRUN_DARWIN_INIT_FDS"

// initConfig is what create sends the init over its configuration pipe.
type initConfig struct {
	// Args is the command to exec; Args[0] is looked up in the PATH of Env
	// when it has no slash.
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
	// Rlimits and Umask are applied before exec.
	Rlimits []seatbelt.Rlimit `json:"rlimits,omitempty"`
	Umask   *uint32           `json:"umask,omitempty"`
	// Fifo is the exec fifo: the init opens it for writing, which blocks
	// until start opens it for reading.
	Fifo string `json:"fifo"`
}

// initStatus is the init's one message on its status pipe.
type initStatus struct {
	Error string `json:"error,omitempty"`
}

// Init is the body of `skillrun init`, the process create starts for a
// container. main calls it when os.Args[1] == "init" and exits 1 with the
// returned error printed to stderr: Init only returns on failure, since it
// ends by exec'ing /usr/bin/sandbox-exec (so the PID create recorded
// becomes the sandboxed process).
//
// The init reads its configuration from the descriptor named in
// _SKILLRUN_DARWIN_INIT_FDS, applies rlimits and umask, enters the working
// directory, reports success on the status descriptor, then blocks
// opening the container's exec.fifo until start opens its other end,
// writes one byte, and execs. If exec fails, the reason is written to the
// fifo, where start reads it.
func Init() error {
	fds := os.Getenv(initFDsEnv)
	if fds == "" {
		return errors.New("init: not started by skillrun create")
	}
	cfgFD, syncFD, err := parseInitFDs(fds)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	syscall.CloseOnExec(cfgFD)
	syscall.CloseOnExec(syncFD)
	cfgFile := os.NewFile(uintptr(cfgFD), "init-config")
	syncFile := os.NewFile(uintptr(syncFD), "init-status")
	var cfg initConfig
	err = json.NewDecoder(cfgFile).Decode(&cfg)
	cfgFile.Close()
	if err != nil {
		err = fmt.Errorf("init: read configuration: %w", err)
	} else {
		err = prepare(&cfg)
	}
	st := initStatus{}
	if err != nil {
		st.Error = err.Error()
	}
	werr := json.NewEncoder(syncFile).Encode(st)
	syncFile.Close()
	if err != nil {
		return err
	}
	if werr != nil {
		return fmt.Errorf("init: report status: %w", werr)
	}
	// Blocks until start opens the fifo for reading.
	fifo, err := os.OpenFile(cfg.Fifo, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("init: open exec fifo: %w", err)
	}
	if _, err := fifo.Write([]byte{0}); err != nil {
		return fmt.Errorf("init: write exec fifo: %w", err)
	}
	// The fifo is close-on-exec: start sees EOF once exec succeeded.
	err = syscall.Exec(cfg.Args[0], cfg.Args, cfg.Env)
	err = fmt.Errorf("exec %q: %w", cfg.Args[0], err)
	fifo.Write([]byte(err.Error()))
	return err
}

func parseInitFDs(s string) (cfg, sync int, err error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("bad %s %q", initFDsEnv, s)
	}
	cfg, err1 := strconv.Atoi(a)
	sync, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || cfg < 3 || sync < 3 {
		return 0, 0, fmt.Errorf("bad %s %q", initFDsEnv, s)
	}
	return cfg, sync, nil
}

// prepare applies what must hold before exec and resolves Args[0].
func prepare(cfg *initConfig) error {
	if len(cfg.Args) == 0 {
		return errors.New("init: no command")
	}
	if cfg.Umask != nil {
		syscall.Umask(int(*cfg.Umask))
	}
	for _, r := range cfg.Rlimits {
		res, ok := rlimitResource(r.Type)
		if !ok {
			return fmt.Errorf("init: rlimit %s: not supported on this system", r.Type)
		}
		// syscall.Setrlimit (not x/sys) so the Go runtime does not
		// restore its own RLIMIT_NOFILE at exec.
		if err := syscall.Setrlimit(res, &syscall.Rlimit{Cur: r.Soft, Max: r.Hard}); err != nil {
			return fmt.Errorf("init: setrlimit %s soft %d hard %d: %w", r.Type, r.Soft, r.Hard, err)
		}
	}
	if err := os.Chdir(cfg.Cwd); err != nil {
		return fmt.Errorf("init: enter working directory: %w", err)
	}
	if !strings.Contains(cfg.Args[0], "/") {
		p, err := lookPath(cfg.Args[0], cfg.Env)
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		cfg.Args = append([]string{p}, cfg.Args[1:]...)
	}
	return nil
}

// lookPath finds file in the PATH of env (the container's, not ours).
func lookPath(file string, env []string) (string, error) {
	pathEnv := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			continue
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: %w in the container's PATH", file, exec.ErrNotFound)
}
