//go:build integration

package security_test

import (
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/runtime/linux/devdir"
	"github.com/skillrun/skillrun/spec"
)

// readerPy tries to read every path of REQ["paths"] directly and through
// the usual detours, then hunts the visible tree for canaries.
const readerPy = `
def rd(p):
    with open(p, "rb") as f:
        return f.read(4096).decode("latin-1")
for p in REQ.get("paths", []):
    for v in (p, "/proc/1/root" + p, "/proc/self/root" + p, "/skill/../.." + p,
              "/tmp/../../.." + p, "/proc/self/cwd/../../.." + p, "/dev/fd/../../.." + p):
        attempt("read " + v, lambda v=v: rd(v))
    d = os.path.dirname(p)
    attempt("ls " + d, lambda d=d: sorted(os.listdir(d)))
skip = {"/proc", "/usr", "/dev", "/sys", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin"}
for root, dirs, files in os.walk("/"):
    if root in skip:
        dirs[:] = []
        continue
    for f in files:
        q = os.path.join(root, f)
        if "canary" in f or "skillrun-sec" in f or f.startswith("id_"):
            attempt("hunt " + q, lambda q=q: rd(q))
sock = os.environ.get("SSH_AUTH_SOCK") or REQ.get("agent")
if sock:
    def agent():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(sock)
        s.sendall(b"\x00\x00\x00\x01\x0b")
        return s.recv(100).hex()
    attempt("ssh-agent " + sock, agent)
done()
`

// TestFilesHomeCanary: a secret file in the caller's HOME is not read.
func TestFilesHomeCanary(t *testing.T) {
	probe(t, "files/home-canary", func(p *P, m *mode) {
		c := plantCanary(p, filepath.Join(m.home, ".skillrun-sec-canary-"+randHex(4)), m.uid, m.gid, 0o600)
		sk := pyProbe(p, m, "home", readerPy, "")
		o := m.skill(p, sk, mustJSON(map[string]any{"paths": []string{c.path, "/root/" + filepath.Base(c.path), "/home/" + filepath.Base(m.home) + "/" + filepath.Base(c.path)}}))
		o.wantCode(p, 0)
		o.out(p)
		c.assertUntouched(p, o)
	})
}

// TestFilesEtcCanary: a world-readable canary in the host's /etc is not
// read (only the sandbox stands between it and the skill).
func TestFilesEtcCanary(t *testing.T) {
	probe(t, "files/etc-canary", func(p *P, m *mode) {
		c := plantCanary(p, "/etc/skillrun-sec-canary-"+randHex(4)+".conf", 0, 0, 0o644)
		sk := pyProbe(p, m, "etc", readerPy, "")
		o := m.skill(p, sk, mustJSON(map[string]any{"paths": []string{c.path}}))
		o.wantCode(p, 0)
		o.out(p)
		c.assertUntouched(p, o)
	})
}

// TestFilesSSHSecret: ~/.ssh keys are not visible and the caller's
// ssh-agent socket is never reached.
func TestFilesSSHSecret(t *testing.T) {
	probe(t, "files/ssh-secret", func(p *P, m *mode) {
		sshDir := filepath.Join(m.home, ".ssh")
		if _, err := os.Stat(sshDir); os.IsNotExist(err) {
			if err := os.Mkdir(sshDir, 0o700); err != nil {
				p.Fatalf("%v", err)
			}
			os.Chown(sshDir, m.uid, m.gid)
			p.Cleanup(func() { os.Remove(sshDir) })
		}
		c := plantCanary(p, filepath.Join(sshDir, "id_ed25519_skillrun_sec_"+randHex(4)), m.uid, m.gid, 0o600)
		sk := pyProbe(p, m, "ssh", readerPy, "")
		sock := filepath.Join(sk.base, "agent.sock")
		accepts := unixListener(p, sock)
		paths := []string{c.path, "/root/.ssh/" + filepath.Base(c.path), "/home/" + filepath.Base(m.home) + "/.ssh/" + filepath.Base(c.path)}
		o := m.run(p, sk, runOpts{input: mustJSON(map[string]any{"paths": paths, "agent": sock}), env: []string{"SSH_AUTH_SOCK=" + sock}})
		o.wantCode(p, 0)
		o.out(p)
		c.assertUntouched(p, o)
		if n := accepts.Load(); n != 0 {
			p.Errorf("LEAK: the caller's ssh-agent socket %s accepted %d connections from the sandbox", sock, n)
		}
	})
}

// TestFilesWriteOutside: writes outside scratch never reach the host.
func TestFilesWriteOutside(t *testing.T) {
	probe(t, "files/write-outside", func(p *P, m *mode) {
		sk := pyProbe(p, m, "write", `
for p in REQ["paths"]:
    for v in (p, "/proc/1/root" + p, "/proc/self/root" + p, "/skill/../.." + p, "/proc/self/cwd/../.." + p):
        def w(v=v):
            with open(v, "w") as f:
                f.write("escaped")
        attempt("write " + v, w)
    attempt("mkdir " + p, lambda p=p: os.mkdir(p + ".d"))
    attempt("symlink " + p, lambda p=p: os.symlink("/etc/passwd", p + ".l"))
done()
`, "")
		open := filepath.Join(sk.base, "open")
		os.Mkdir(open, 0o777)
		os.Chmod(open, 0o777)
		name := "skillrun-sec-" + sk.token
		targets := []string{
			"/" + name, "/etc/" + name, "/usr/" + name, "/usr/local/" + name, "/root/" + name,
			filepath.Join(m.home, name), "/tmp/" + name, "/var/tmp/" + name, "/dev/shm/" + name,
			"/run/" + name, filepath.Join(sk.dir, name), filepath.Join(open, name),
		}
		o := m.skill(p, sk, mustJSON(map[string]any{"paths": targets}))
		o.wantCode(p, 0)
		out := o.out(p)
		if str(out, "write /tmp/"+name) != "ok" {
			p.Errorf("the probe could not even write its own scratch (/tmp): %s", str(out, "write /tmp/"+name))
		}
		for _, tg := range targets {
			for _, suffix := range []string{"", ".d", ".l"} {
				if _, err := os.Lstat(tg + suffix); err == nil {
					os.RemoveAll(tg + suffix)
					p.Errorf("LEAK: the sandbox created %s on the host", tg+suffix)
				}
			}
		}
		if ents, _ := os.ReadDir(open); len(ents) != 0 {
			p.Errorf("LEAK: the sandbox wrote into the host's world-writable %s: %v", open, ents[0].Name())
		}
	})
}

// TestFilesSkillSymlinks: symlinks and traversal planted in the skill
// folder do not reach host files, and an entry point that is a symlink
// out of the folder is refused before anything runs.
func TestFilesSkillSymlinks(t *testing.T) {
	probe(t, "files/skill-symlinks", func(p *P, m *mode) {
		sk := pyProbe(p, m, "links", `
def rd(p):
    with open(p, "rb") as f:
        return f.read(4096).decode("latin-1")
for rel in ("data/canary", "data/rel", "data/etc/passwd", "data/etc/shadow", "data/up" + REQ["canary"],
            "data/root" + REQ["canary"], "data/root/etc/passwd", "scripts/lib.py"):
    attempt("read " + rel, lambda rel=rel: rd("/skill/" + rel))
for rel in ("data/etc", "data/root", "data/up", "data/root/home"):
    attempt("ls " + rel, lambda rel=rel: sorted(os.listdir("/skill/" + rel)))
sys.path.insert(0, "/skill/scripts")
attempt("import lib", lambda: __import__("lib") and None)
attempt("realpath", lambda: os.path.realpath("/skill/data/canary"))
done()
`, "")
		secret := filepath.Join(sk.base, "secret")
		os.Mkdir(secret, 0o755)
		c := plantCanary(p, filepath.Join(secret, "canary.txt"), 0, 0, 0o644)
		links := map[string]string{
			"data/canary":    c.path,
			"data/rel":       "../../secret/canary.txt",
			"data/etc":       "/etc",
			"data/root":      "/",
			"data/up":        "../../../../../../../..",
			"scripts/lib.py": c.path,
		}
		os.MkdirAll(filepath.Join(sk.dir, "data"), 0o755)
		for l, target := range links {
			if err := os.Symlink(target, filepath.Join(sk.dir, l)); err != nil {
				p.Fatalf("%v", err)
			}
			os.Lchown(filepath.Join(sk.dir, l), sk.uid, sk.uid)
		}
		o := m.skill(p, sk, mustJSON(map[string]any{"canary": c.path}))
		o.wantCode(p, 0)
		o.out(p)
		c.assertUntouched(p, o)
		assertNoHostPasswd(p, o)

		// An entry point that is a symlink to a host script: refused (2),
		// and the host script never ran.
		marker := filepath.Join(sk.base, "ran-"+sk.token)
		hostScript := filepath.Join(sk.base, "host.py")
		os.WriteFile(hostScript, []byte("open("+quote(marker)+", 'w').write('ran')\n"), 0o755)
		sk2 := newSkill(p, m, "entry", map[string]string{}, "")
		os.MkdirAll(filepath.Join(sk2.dir, "scripts"), 0o755)
		if err := os.Symlink(hostScript, filepath.Join(sk2.dir, "scripts", "main.py")); err != nil {
			p.Fatalf("%v", err)
		}
		o2 := m.skill(p, sk2, "{}")
		if o2.code != 2 {
			p.Errorf("an entry point symlinked out of the skill folder was not refused with exit 2\n%s", o2)
		}
		if _, err := os.Stat(marker); err == nil {
			p.Errorf("LEAK: the host script %s behind the entry symlink ran", hostScript)
		}
	})
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// assertNoHostPasswd checks that no line of the host's /etc/passwd or
// /etc/group appears in the output.
func assertNoHostPasswd(p *P, o *outcome) {
	p.Helper()
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		for _, line := range readLines(f) {
			if line != "" && strings.Contains(o.all(), line) {
				p.Errorf("LEAK: the host's %s line %q appears in the output", f, line)
			}
		}
	}
}

// TestFilesRootListing: the container's / and /etc hold exactly what the
// profile binds; no other host folder is visible.
func TestFilesRootListing(t *testing.T) {
	probe(t, "files/root-listing", func(p *P, m *mode) {
		sk := pyProbe(p, m, "ls", `
for d in ("/", "/etc", "/dev", "/tmp", "/skill"):
    attempt(d, lambda d=d: sorted(os.listdir(d)))
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		layout := spec.ProbeHostLayout()
		want := map[string]bool{"proc": true, "dev": true, "etc": true, "skill": true, "tmp": true}
		for _, d := range layout.Dirs {
			want[strings.TrimPrefix(d, "/")] = true
		}
		for k := range layout.Symlinks {
			want[k] = true
		}
		wantEtc := map[string]bool{"passwd": true, "group": true, "hosts": true, "nsswitch.conf": true}
		for _, f := range append(append([]string(nil), layout.Etc...), layout.EtcDirs...) {
			wantEtc[path.Base(f)] = true
		}
		check := func(dir string, want map[string]bool) {
			got, ok := out[dir].([]any)
			if !ok || len(got) == 0 {
				p.Fatalf("the probe could not list %s: %v", dir, out[dir])
			}
			var extra []string
			for _, e := range got {
				if s, _ := e.(string); !want[s] {
					extra = append(extra, s)
				}
			}
			if len(extra) > 0 {
				sort.Strings(extra)
				p.Errorf("LEAK: the container's %s shows %v beyond the profile's %v", dir, extra, keys(want))
			}
		}
		check("/", want)
		check("/etc", wantEtc)
		// And the host's own top-level folders that the profile does not
		// bind are named nowhere in the listing.
		ents, _ := os.ReadDir("/")
		root, _ := out["/"].([]any)
		for _, e := range ents {
			if want[e.Name()] {
				continue
			}
			for _, g := range root {
				if g == e.Name() {
					p.Errorf("LEAK: host folder /%s is visible in the container", e.Name())
				}
			}
		}
	})
}

func keys(m map[string]bool) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// TestFilesDev: the sandbox's /dev holds the OCI default devices and
// links, nothing else; the devices work; and nothing the sandbox tries
// (create, link, mknod, chmod, remove, rename) changes the host's device
// folder (devdir.HostDir) its /dev is bound to, checked on the host.
func TestFilesDev(t *testing.T) {
	probe(t, "files/dev", func(p *P, m *mode) {
		sk := pyProbe(p, m, "dev", `
import stat
def wr(v):
    with open(v, "w") as f:
        f.write("x")
def null():
    with open("/dev/null", "r+b") as f:
        f.write(b"x")
def rnd():
    with open("/dev/urandom", "rb") as f:
        return len(f.read(4))
attempt("ls", lambda: sorted(os.listdir("/dev")))
attempt("write /dev/null", null)
attempt("read /dev/urandom", rnd)
attempt("create", lambda: wr("/dev/skillrun-x"))
attempt("mkdir", lambda: os.mkdir("/dev/skillrun-d"))
attempt("symlink", lambda: os.symlink("/etc/passwd", "/dev/skillrun-l"))
attempt("mknod", lambda: os.mknod("/dev/skillrun-b", 0o600 | stat.S_IFBLK, os.makedev(8, 0)))
attempt("chmod", lambda: os.chmod("/dev/null", 0o600))
attempt("unlink", lambda: os.unlink("/dev/zero"))
attempt("rename", lambda: os.rename("/dev/full", "/dev/skillrun-full"))
done()
`, "")
		if os.Geteuid() == 0 {
			// What skill run does first: make the folder when it is missing.
			_ = devdir.Ensure(devdir.HostDir)
		}
		bound := devdir.Check(devdir.HostDir) == nil
		var before os.FileInfo
		if bound {
			before, _ = os.Lstat(devdir.HostDir)
		}
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		if str(out, "write /dev/null") != "ok" || str(out, "read /dev/urandom") != "4" {
			p.Errorf("the sandbox's devices do not work: /dev/null %s, /dev/urandom %s", str(out, "write /dev/null"), str(out, "read /dev/urandom"))
		}
		allowed := map[string]bool{}
		for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty", "pts", "shm", "ptmx", "fd", "stdin", "stdout", "stderr", "core"} {
			allowed[n] = true
		}
		ls, _ := out["ls"].([]any)
		if len(ls) == 0 {
			p.Fatalf("the probe could not list /dev: %s", str(out, "ls"))
		}
		for _, e := range ls {
			if s, _ := e.(string); !allowed[s] {
				p.Errorf("LEAK: the sandbox's /dev holds %q beyond the default devices", s)
			}
		}
		if str(out, "mknod") == "ok" {
			p.Errorf("ESCAPE: the sandbox made a block device node in /dev")
		}
		if !bound {
			p.Skipf("/dev is the runtime's tmpfs here (%s is not a usable device folder: %v); the host-side check needs it", devdir.HostDir, devdir.Check(devdir.HostDir))
		}
		if err := devdir.Check(devdir.HostDir); err != nil {
			p.Errorf("LEAK: the sandbox changed the host's device folder: %v", err)
		}
		if after, err := os.Lstat(devdir.HostDir); err != nil || !after.ModTime().Equal(before.ModTime()) {
			p.Errorf("LEAK: the host's device folder %s was modified during the run", devdir.HostDir)
		}
		for _, k := range []string{"create", "mkdir", "symlink", "chmod", "unlink", "rename"} {
			if str(out, k) == "ok" {
				p.Errorf("the sandbox's %s in the read-only /dev reported success", k)
			}
		}
	})
}
