//go:build integration

package security_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sha256File(p *P, path string) string {
	p.Helper()
	f, err := os.Open(path)
	if err != nil {
		p.Fatalf("%v", err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// cli runs skillrun directly as the mode's caller (no canaries), for
// helper verbs (list, exec, skill bundle).
func (m *mode) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if m.rootless() {
		full := []string{"-u", m.user.Username, "--", "env", "-i", "PATH=/usr/bin:/bin", "HOME=" + m.home, "XDG_RUNTIME_DIR=" + m.xdg(), m.bin}
		cmd = exec.CommandContext(ctx, "runuser", append(full, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, m.bin, args...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), nil
}

// TestEscapeProcSelfExe: the class of CVE-2019-5736. The skill tries to
// open every /proc/PID/exe it can see for writing, for 3 s, while the test
// runs `skillrun exec` into the container (the runtime process entering
// it is the target of that CVE). The runtime binary on the host must not
// change.
func TestEscapeProcSelfExe(t *testing.T) {
	probe(t, "escape/proc-self-exe", func(p *P, m *mode) {
		sk := pyProbe(p, m, "exe", `
def tryw(t, flags):
    fd = os.open(t, flags)
    os.write(fd, b"")
    os.close(fd)
targets = {"/proc/self/exe", "/proc/1/exe"} | {"/proc/%s/exe" % x for x in os.listdir("/proc") if x.isdigit()}
for t in sorted(targets):
    for flags, name in ((os.O_WRONLY, "wronly"), (os.O_RDWR, "rdwr"), (os.O_WRONLY | os.O_APPEND, "append")):
        attempt("open %s %s" % (t, name), lambda t=t, flags=flags: tryw(t, flags))
    def reopen(t=t):
        fd = os.open(t, os.O_PATH)
        tryw("/proc/self/fd/%d" % fd, os.O_WRONLY)
    attempt("open %s via O_PATH" % t, reopen)
seen, hits, errs = set(), 0, {}
end = time.time() + REQ["seconds"]
while time.time() < end:
    for x in os.listdir("/proc"):
        if not x.isdigit():
            continue
        try:
            seen.add(os.readlink("/proc/%s/exe" % x))
        except OSError:
            pass
        try:
            fd = os.open("/proc/%s/exe" % x, os.O_WRONLY)
            hits += 1
            os.close(fd)
        except OSError as e:
            errs[e.errno] = errs.get(e.errno, 0) + 1
OUT["race seen exes"] = sorted(seen)
OUT["race write opens"] = hits
OUT["race errnos"] = errs
done()
`, "")
		before := sha256File(p, m.bin)
		python, _ := filepath.EvalSymlinks("/usr/bin/python3")
		beforePy := sha256File(p, python)
		execs := 0
		o := m.run(p, sk, runOpts{input: `{"seconds": 3}`, during: func() {
			var id string
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && id == ""; time.Sleep(50 * time.Millisecond) {
				out, _ := m.cli("list", "-q")
				for _, l := range strings.Fields(out) {
					if strings.HasPrefix(l, "skill-"+sk.name+"-") {
						id = l
					}
				}
			}
			if id == "" {
				p.Logf("the container of %s never showed in skillrun list", sk.name)
			}
			for i := 0; i < 5 && id != ""; i++ {
				if out, err := m.cli("exec", id, "/usr/bin/true"); err == nil {
					execs++
				} else {
					p.Logf("exec into %s: %v: %s", id, err, out)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}})
		o.wantCode(p, 0)
		out := o.out(p)
		if after := sha256File(p, m.bin); after != before {
			p.Errorf("LEAK: the runtime binary %s changed during the run (sha256 %s -> %s)", m.bin, before, after)
		}
		if after := sha256File(p, python); after != beforePy {
			p.Errorf("LEAK: the host's %s changed during the run", python)
		}
		for k := range out {
			if strings.HasPrefix(k, "open ") {
				if v := str(out, k); v == "ok" {
					p.Errorf("LEAK: %s succeeded", k)
				}
			}
		}
		if n, _ := out["race write opens"].(float64); n != 0 {
			p.Errorf("LEAK: %v /proc/PID/exe were opened for writing", n)
		}
		if execs == 0 {
			p.Logf("note: no `skillrun exec` into the container succeeded; only the skill's own processes were targets")
		}
		p.Logf("exec into the container: %d; exes the skill saw: %v", execs, out["race seen exes"])
	})
}

// TestEscapeFDLeak: the class of CVE-2024-21626. The caller of skillrun
// holds a canary file and a host folder open (inherited fds 3 and 4) and
// runs it from a host folder; nothing of them reaches the skill.
func TestEscapeFDLeak(t *testing.T) {
	probe(t, "escape/fd-leak", func(p *P, m *mode) {
		sk := pyProbe(p, m, "fd", `
fds = {}
for f in os.listdir("/proc/self/fd"):
    try:
        fds[f] = os.readlink("/proc/self/fd/" + f)
    except OSError as e:
        fds[f] = "errno %d" % e.errno
OUT["fds"] = fds
OUT["cwd"] = os.getcwd()
for fd in range(3, 256):
    try:
        os.fstat(fd)
    except OSError:
        continue
    attempt("pread fd %d" % fd, lambda fd=fd: os.pread(fd, 4096, 0).decode("latin-1"))
    attempt("listdir fd %d" % fd, lambda fd=fd: sorted(os.listdir(fd)))
    attempt("openat fd %d" % fd, lambda fd=fd: open(os.open("canary.txt", os.O_RDONLY, dir_fd=fd)).read())
for q in ("/proc/self/cwd", "/proc/1/cwd", "/proc/self/root", "../../..", "/proc/self/fd/3", "/proc/self/fd/4"):
    attempt("ls " + q, lambda q=q: sorted(os.listdir(q)))
done()
`, "")
		dir := filepath.Join(sk.base, "fdleak-"+randHex(4))
		os.Mkdir(dir, 0o755)
		c := plantCanary(p, filepath.Join(dir, "canary.txt"), 0, 0, 0o644)
		f, err := os.Open(c.path)
		if err != nil {
			p.Fatalf("%v", err)
		}
		defer f.Close()
		d, err := os.Open(dir)
		if err != nil {
			p.Fatalf("%v", err)
		}
		defer d.Close()
		// opening the canary moved its atime: take the new one as the
		// reference.
		c.atime = atime(c.path)
		o := m.run(p, sk, runOpts{extraFiles: []*os.File{f, d}, cwd: dir})
		o.wantCode(p, 0)
		out := o.out(p)
		c.assertUntouched(p, o)
		if strings.Contains(o.stdout, dir) || strings.Contains(o.stdout, filepath.Base(dir)) {
			p.Errorf("LEAK: the caller's folder %s (an inherited fd or the working directory) is visible in the sandbox", dir)
		}
		if cwd := str(out, "cwd"); cwd != "/tmp" {
			p.Errorf("the skill's working directory is %q, want /tmp", cwd)
		}
		for fd, target := range out["fds"].(map[string]any) {
			s, _ := target.(string)
			if strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "/proc/") && !strings.HasPrefix(s, "/skill") && !strings.HasPrefix(s, "/dev/") {
				p.Errorf("LEAK: fd %s in the sandbox points to %s", fd, s)
			}
		}
	})
}

// hostOnlyNames are top-level host folders that the sandbox does not
// bind: seeing one in a listing means the host's / leaked.
func hostOnlyNames() []string {
	want := map[string]bool{"proc": true, "dev": true, "etc": true, "skill": true, "tmp": true, "usr": true, "bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true, "libx32": true}
	var names []string
	ents, _ := os.ReadDir("/")
	for _, e := range ents {
		if !want[e.Name()] {
			names = append(names, e.Name())
		}
	}
	return names
}

// bundle writes the probe's OCI bundle with `skillrun skill bundle` as
// the mode's caller, and returns its folder and decoded config.
func (m *mode) bundle(p *P, sk *skill, name string) (string, map[string]any) {
	p.Helper()
	dir := filepath.Join(sk.base, name)
	os.Mkdir(dir, 0o700)
	if m.rootless() {
		os.Chown(dir, m.uid, m.gid)
	}
	if out, err := m.cli("skill", "bundle", "-o", dir, sk.dir); err != nil {
		p.Fatalf("skill bundle: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		p.Fatalf("%v", err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		p.Fatalf("%v", err)
	}
	return dir, cfg
}

func writeConfig(p *P, dir string, cfg map[string]any) {
	p.Helper()
	b, _ := json.MarshalIndent(cfg, "", "  ")
	// In place: keep the owner skill bundle gave the file.
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		p.Fatalf("%v", err)
	}
}

// TestEscapeCwdFD: the other half of CVE-2024-21626: a bundle whose
// process.cwd is /proc/self/fd/N (N = 3..9) must not start the process
// in a host folder.
func TestEscapeCwdFD(t *testing.T) {
	probe(t, "escape/cwd-fd", func(p *P, m *mode) {
		sk := pyProbe(p, m, "cwdfd", `
attempt("cwd", lambda: os.getcwd())
for q in (".", "..", "../..", "../../..", "../../../..", "../../../../.."):
    attempt("ls " + q, lambda q=q: sorted(os.listdir(q)))
done()
`, "")
		secret := plantCanary(p, filepath.Join(sk.base, "cwd-canary.txt"), 0, 0, 0o644)
		var outs []*outcome
		for n := 3; n <= 9; n++ {
			dir, cfg := m.bundle(p, sk, fmt.Sprintf("bundle-fd%d", n))
			cfg["process"].(map[string]any)["cwd"] = fmt.Sprintf("/proc/self/fd/%d", n)
			writeConfig(p, dir, cfg)
			o := m.run(p, sk, runOpts{args: []string{"run", dir}})
			for _, name := range hostOnlyNames() {
				if strings.Contains(o.stdout, `"`+name+`"`) {
					p.Errorf("LEAK: with cwd /proc/self/fd/%d the process sees the host's /%s\n%s", n, name, o)
				}
			}
			outs = append(outs, o)
		}
		secret.assertUntouched(p, outs...)
	})
}

// TestEscapeSymlinkMount: the class of CVE-2021-30465. The bundle's rootfs
// holds symlinks named like mount targets that point to a host folder
// (absolutely and by ../ traversal); the mounts must land inside the
// rootfs, never on the host folder.
func TestEscapeSymlinkMount(t *testing.T) {
	probe(t, "escape/symlink-mount-target", func(p *P, m *mode) {
		sk := pyProbe(p, m, "symmnt", `
for d in ("/evil", "/evil2", "/evil3"):
    def w(d=d):
        with open(d + "/escaped-" + sys.argv[1], "w") as f:
            f.write("x")
    attempt("write " + d, w)
    attempt("ls " + d, lambda d=d: os.listdir(d))
done()
`, "")
		target := filepath.Join(sk.base, "target-"+randHex(4))
		os.Mkdir(target, 0o777)
		os.Chmod(target, 0o777)
		dir, cfg := m.bundle(p, sk, "bundle")
		rootfs := filepath.Join(dir, "rootfs")
		st, _ := os.Stat(rootfs)
		owner := statUID(st)
		links := map[string]string{
			"evil":  target,
			"evil2": strings.Repeat("../", 12) + strings.TrimPrefix(target, "/"),
			"evil3": "/proc/self/root" + target,
		}
		for name, to := range links {
			l := filepath.Join(rootfs, name)
			if err := os.Symlink(to, l); err != nil {
				p.Fatalf("%v", err)
			}
			os.Lchown(l, owner, owner)
		}
		mounts := cfg["mounts"].([]any)
		mounts = append(mounts,
			map[string]any{"destination": "/evil", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=1m"}},
			map[string]any{"destination": "/evil2", "type": "bind", "source": sk.dir, "options": []string{"rbind", "ro"}},
			map[string]any{"destination": "/evil3", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777", "size=1m"}},
		)
		cfg["mounts"] = mounts
		writeConfig(p, dir, cfg)
		var mountedOnHost []string
		o := m.run(p, sk, runOpts{args: []string{"run", dir}, during: func() {
			for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				for _, line := range strings.Split(mountTable(), "\n") {
					if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], target) {
						mountedOnHost = append(mountedOnHost, line)
					}
				}
			}
		}})
		for _, l := range mountedOnHost {
			p.Errorf("LEAK: a mount of the container landed on the host folder: %s", l)
		}
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			p.Errorf("LEAK: the container wrote into the host folder %s: %s\n%s", target, ents[0].Name(), o)
		}
		if strings.Contains(mountTable(), target) {
			p.Errorf("LEAK: the host's mount table names %s after the run", target)
		}
	})
}

// TestEscapeProcSys: the sandbox cannot write the host's kernel knobs
// (core_pattern is a classic escape: a pipe handler runs as host root).
func TestEscapeProcSys(t *testing.T) {
	probe(t, "escape/proc-sys-write", func(p *P, m *mode) {
		sk := pyProbe(p, m, "sysctl", `
def w(path, data):
    with open(path, "w") as f:
        f.write(data)
tok = sys.argv[1]
for path, data in (("/proc/sys/kernel/core_pattern", "|/tmp/" + tok), ("/proc/sys/kernel/modprobe", "/tmp/" + tok),
                   ("/proc/sys/kernel/hotplug", "/tmp/" + tok), ("/sys/kernel/uevent_helper", "/tmp/" + tok),
                   ("/proc/sys/fs/binfmt_misc/register", ":%s:E::x::/tmp/%s:" % (tok, tok)),
                   ("/sys/fs/cgroup/release_agent", "/tmp/" + tok), ("/proc/sys/vm/overcommit_memory", "1")):
    attempt("write " + path, lambda path=path, data=data: w(path, data))
done()
`, "")
		knobs := []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/overcommit_memory"}
		before := map[string]string{}
		for _, k := range knobs {
			b, _ := os.ReadFile(k)
			before[k] = string(b)
		}
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		for _, k := range knobs {
			if b, _ := os.ReadFile(k); string(b) != before[k] {
				os.WriteFile(k, []byte(before[k]), 0o644)
				p.Errorf("LEAK: the host's %s changed from %q to %q (restored)", k, before[k], b)
			}
		}
		for k := range out {
			if v := str(out, k); v == "ok" {
				p.Errorf("LEAK: %s succeeded", k)
			}
		}
	})
}
