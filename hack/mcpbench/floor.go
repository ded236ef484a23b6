//go:build linux

// The floors a warm call is measured against: python3 pre-started on
// the script, and the os._exit variant of the skill.

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// pythonEnv is the environment python3 runs with outside the sandbox:
// the variables a sandbox gives its entry point (spec's processEnv: PATH,
// HOME, TMPDIR, LANG), tmp as HOME and TMPDIR. Not the invoker's: a
// PYTHONUNBUFFERED there would change what the interpreter does at its
// exit (the sandbox's python3 runs with -E, and none is set inside).
func pythonEnv(tmp string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + tmp, "TMPDIR=" + tmp, "LANG=C.UTF-8"}
}

// prestarted is python3 started ahead on a script, its stdin a pipe it
// is blocked reading: a warm sandbox's entry point without the sandbox.
type prestarted struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
}

func prestart(script string, env []string) (*prestarted, error) {
	c := exec.Command("/usr/bin/python3", script)
	c.Env = env
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
		if w, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", c.Process.Pid)); strings.Contains(string(w), "pipe") {
			return &prestarted{cmd: c, in: in, out: out}, nil
		}
		if time.Now().After(deadline) {
			c.Process.Kill()
			c.Wait()
			return nil, fmt.Errorf("pre-started python3 %s: not blocked on its stdin after 10 s", script)
		}
	}
}

// prePool is a pool of n pre-started python3 on script, refilled as a
// server's pool of warm sandboxes is: take the oldest, fill before the
// next call.
type prePool struct {
	script string
	env    []string
	n      int
	ready  []*prestarted
}

func (p *prePool) fill() error {
	for len(p.ready) < p.n {
		x, err := prestart(p.script, p.env)
		if err != nil {
			return err
		}
		p.ready = append(p.ready, x)
	}
	return nil
}

func (p *prePool) take() *prestarted {
	x := p.ready[0]
	p.ready = p.ready[1:]
	return x
}

func (p *prePool) close() {
	for _, x := range p.ready {
		x.cmd.Process.Kill()
		x.cmd.Wait()
	}
	p.ready = nil
}

// call writes the input, closes stdin, reads the output to its end and
// reaps the process: the timed span of the pre-started rows.
func (p *prestarted) call(input string) error {
	if _, err := io.WriteString(p.in, input); err != nil {
		return err
	}
	if err := p.in.Close(); err != nil {
		return err
	}
	out, err := io.ReadAll(p.out)
	if err != nil {
		return err
	}
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("pre-started python3: %w", err)
	}
	if !bytes.Contains(out, []byte("hello")) {
		return fmt.Errorf("pre-started python3 printed %q", out)
	}
	return nil
}

// osExitVariant writes a copy of the skill folder whose entry point
// (scripts/main.py) ends with `sys.stdout.flush(); os._exit(0)`: the
// interpreter exits without its teardown. It is written next to the
// skill, as DIR-os_exit/NAME (the folder keeps the skill's name).
func osExitVariant(dir string) (string, error) {
	dir = filepath.Clean(dir)
	dst := filepath.Join(dir+"-os_exit", filepath.Base(dir))
	if err := os.RemoveAll(filepath.Dir(dst)); err != nil {
		return "", err
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if rel == filepath.Join("scripts", "main.py") {
			b = append(bytes.TrimRight(b, "\n"), "\n\nimport os, sys\nsys.stdout.flush(); os._exit(0)\n"...)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, fi.Mode().Perm())
	})
	if err != nil {
		return "", fmt.Errorf("os._exit variant: %w", err)
	}
	if err := os.Chmod(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	return dst, nil
}
