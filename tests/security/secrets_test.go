//go:build integration

package security_test

import (
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestSecretsEnv: the caller's environment (canaries set on every run)
// is absent inside, wherever the skill looks.
func TestSecretsEnv(t *testing.T) {
	probe(t, "secrets/env", func(p *P, m *mode) {
		sk := pyProbe(p, m, "env", `
OUT["environ"] = dict(os.environ)
for f in ("/proc/self/environ", "/proc/1/environ", "/proc/self/task/%d/environ" % os.getpid()):
    attempt(f, lambda f=f: open(f, "rb").read().decode("latin-1"))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        attempt("env " + pid, lambda pid=pid: open("/proc/%s/environ" % pid, "rb").read().decode("latin-1"))
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		if env, ok := out["environ"].(map[string]any); !ok || env["PATH"] == nil {
			p.Fatalf("the probe did not dump its environment: %v", out["environ"])
		}
		for _, k := range []string{"SKILLRUN_SECRET", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "LANG_CANARY"} {
			if strings.Contains(o.stdout, `"`+k+`"`) {
				p.Errorf("LEAK: the caller's variable %s is in the sandbox", k)
			}
		}
		// (the canary values are checked on every run by m.run)
	})
}

// TestSecretsHostname: the host's hostname (a canary in the caller's UTS
// namespace, and the real one) is not revealed.
func TestSecretsHostname(t *testing.T) {
	probe(t, "secrets/hostname", func(p *P, m *mode) {
		sk := pyProbe(p, m, "host", `
OUT["gethostname"] = socket.gethostname()
OUT["uname"] = list(os.uname())
attempt("getfqdn", lambda: socket.getfqdn())
for f in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/domainname", "/etc/hostname", "/etc/hosts", "/etc/mailname"):
    attempt(f, lambda f=f: open(f).read())
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		if str(out, "gethostname") != "skill" {
			p.Errorf("hostname inside is %q, want the profile's %q", str(out, "gethostname"), "skill")
		}
		real, _ := os.Hostname()
		if real != "" && real != "skill" && regexp.MustCompile(`(^|[^A-Za-z0-9.-])`+regexp.QuoteMeta(real)+`($|[^A-Za-z0-9.-])`).MatchString(string(o.res.Output)) {
			p.Errorf("LEAK: the host's real hostname %q appears in the output", real)
		}
	})
}

// TestSecretsUsers: no host user or group is revealed.
func TestSecretsUsers(t *testing.T) {
	probe(t, "secrets/users", func(p *P, m *mode) {
		sk := pyProbe(p, m, "users", `
import pwd, grp
for f in ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow", "/etc/subuid", "/etc/subgid", "/etc/sudoers"):
    attempt(f, lambda f=f: open(f).read())
attempt("getpwall", lambda: [list(x) for x in pwd.getpwall()])
attempt("getgrall", lambda: [list(x)[:3] for x in grp.getgrall()])
attempt("/home", lambda: os.listdir("/home"))
for uid in (0, 1000, 1001, 65534):
    attempt("getpwuid %d" % uid, lambda uid=uid: list(pwd.getpwuid(uid)))
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		out := o.out(p)
		if !strings.HasPrefix(str(out, "/etc/passwd"), "skill:") {
			p.Errorf("the sandbox's /etc/passwd is not the generated one: %q", str(out, "/etc/passwd"))
		}
		assertNoHostPasswd(p, o)
		for _, line := range readLines("/etc/passwd") {
			f := strings.Split(line, ":")
			if len(f) < 3 {
				continue
			}
			uid, _ := strconv.Atoi(f[2])
			if uid >= 1000 && uid != 65534 && regexp.MustCompile(`\b`+regexp.QuoteMeta(f[0])+`\b`).MatchString(string(o.res.Output)) {
				p.Errorf("LEAK: the host user %q appears in the output", f[0])
			}
		}
	})
}

// TestSecretsMachineID: the host's machine identity (machine-id, boot id,
// DMI ids, MAC addresses) is not revealed.
func TestSecretsMachineID(t *testing.T) {
	probe(t, "secrets/machine-id", func(p *P, m *mode) {
		sk := pyProbe(p, m, "mid", `
for f in ("/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id",
          "/sys/class/dmi/id/product_uuid", "/sys/class/dmi/id/product_serial", "/sys/class/dmi/id/board_serial",
          "/proc/net/dev", "/proc/net/arp", "/proc/net/route"):
    attempt(f, lambda f=f: open(f).read())
attempt("if_nameindex", lambda: socket.if_nameindex())
def macs():
    import fcntl, struct
    out = {}
    for i, name in socket.if_nameindex():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        info = fcntl.ioctl(s.fileno(), 0x8927, struct.pack("256s", name.encode()[:15]))
        out[name] = info[18:24].hex(":")
    return out
attempt("macs", macs)
done()
`, "")
		o := m.skill(p, sk, "{}")
		o.wantCode(p, 0)
		o.out(p)
		secrets := map[string]string{}
		for _, f := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id", "/sys/class/dmi/id/product_uuid", "/sys/class/dmi/id/product_serial"} {
			if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) >= 8 {
				secrets[f] = strings.TrimSpace(string(b))
			}
		}
		ifs, _ := net.Interfaces()
		for _, i := range ifs {
			if mac := i.HardwareAddr.String(); mac != "" && mac != "00:00:00:00:00:00" {
				secrets["MAC of "+i.Name] = mac
			}
		}
		if len(secrets) == 0 {
			p.Skipf("skipped: this host has no machine-id, boot id, DMI id or MAC address to compare with")
		}
		for what, s := range secrets {
			if strings.Contains(strings.ToLower(o.all()), strings.ToLower(s)) {
				p.Errorf("LEAK: the host's %s (%s) is readable in the sandbox", what, s)
			}
		}
	})
}
