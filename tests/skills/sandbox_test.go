//go:build integration

package skills_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// report is what the probe skill saw inside the sandbox.
type report struct {
	UID        int               `json:"uid"`
	UIDMap     []string          `json:"uid_map"`
	CapEff     string            `json:"cap_eff"`
	CapBnd     string            `json:"cap_bnd"`
	NoNewPrivs string            `json:"no_new_privs"`
	Seccomp    string            `json:"seccomp"`
	Env        map[string]string `json:"env"`
	Hostname   string            `json:"hostname"`
	Ls         map[string]any    `json:"ls"`
	Passwd     string            `json:"passwd"`
	Connect    string            `json:"connect"`
	Unshare    string            `json:"unshare"`
	AFPacket   string            `json:"af_packet"`
	WriteSkill string            `json:"write_skill"`
	WriteUsr   string            `json:"write_usr"`
	WriteTmp   string            `json:"write_tmp"`
	Cwd        string            `json:"cwd"`
}

func TestSandboxProfile(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		r, res := m.skillRun(t, 0, m.probe(), `{"mode": "report"}`, "--env", "GRANTED=yes")
		var rep report
		if err := json.Unmarshal(r.Output, &rep); err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		// Identity: one mapped ID, never host root.
		if len(rep.UIDMap) != 3 || rep.UIDMap[0] != "0" || rep.UIDMap[2] != "1" || rep.UIDMap[1] == "0" {
			t.Errorf("uid_map = %v", rep.UIDMap)
		}
		if m.user != nil && rep.UIDMap[1] != itoa(m.uid) {
			t.Errorf("rootless uid_map %v does not map to the caller %d", rep.UIDMap, m.uid)
		}
		if rep.CapEff != "0000000000000000" || rep.CapBnd != "0000000000000000" || rep.NoNewPrivs != "1" || rep.Seccomp != "2" {
			t.Errorf("caps %s/%s nnp %s seccomp %s", rep.CapEff, rep.CapBnd, rep.NoNewPrivs, rep.Seccomp)
		}
		// Environment: allowlist plus the grant; the caller's canary
		// (SKILLRUN_CANARY is set in skillrun's environment) must not leak.
		want := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "SKILL_DIR": "/skill", "GRANTED": "yes"}
		for k, v := range want {
			if rep.Env[k] != v {
				t.Errorf("env %s = %q, want %q", k, rep.Env[k], v)
			}
		}
		for k := range rep.Env {
			if _, ok := want[k]; !ok && k != "PWD" && k != "LC_CTYPE" {
				t.Errorf("unexpected env %s=%s", k, rep.Env[k])
			}
		}
		if strings.Contains(res.stdout, "canary-7f3a9") {
			t.Error("the caller's environment leaked into the sandbox")
		}
		// Filesystem: no host users, homes, runtime state or /sys.
		if strings.Count(rep.Passwd, "\n") != 1 || !strings.HasPrefix(rep.Passwd, "skill:x:0:0:") {
			t.Errorf("passwd = %q", rep.Passwd)
		}
		for _, p := range []string{"/home", "/root", "/run", "/var", "/sys"} {
			if v, ok := rep.Ls[p].(string); !ok || !strings.HasPrefix(v, "errno 2") {
				t.Errorf("%s visible: %v", p, rep.Ls[p])
			}
		}
		etc, _ := json.Marshal(rep.Ls["/etc"])
		for _, bad := range []string{"shadow", "hostname", "ssh", "resolv.conf", "sudoers"} {
			if strings.Contains(string(etc), bad) {
				t.Errorf("/etc has %s: %s", bad, etc)
			}
		}
		if rep.Hostname != "skill" || rep.Cwd != "/tmp" {
			t.Errorf("hostname %q cwd %q", rep.Hostname, rep.Cwd)
		}
		// Read-only skill and system, writable scratch.
		if rep.WriteSkill != "errno 30" || rep.WriteUsr != "errno 30" || rep.WriteTmp != "ok" {
			t.Errorf("writes: skill %s usr %s tmp %s", rep.WriteSkill, rep.WriteUsr, rep.WriteTmp)
		}
		// No network, no namespaces, no raw sockets.
		if rep.Connect != "errno 101" {
			t.Errorf("connect = %s, want ENETUNREACH", rep.Connect)
		}
		if rep.Unshare != "errno 1" || rep.AFPacket != "errno 1" {
			t.Errorf("unshare %s af_packet %s, want EPERM", rep.Unshare, rep.AFPacket)
		}
	})
}

func TestSandboxWritesStayInside(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		ws := ownedDir(t, m)
		outside := filepath.Join(os.TempDir(), "skillrun-outside-"+itoa(os.Getpid())+".txt")
		os.Remove(outside)
		// /tmp in the sandbox is a private tmpfs: the file must not appear
		// in the host's /tmp.
		r, res := m.skillRun(t, 0, m.probe(), `{"mode": "write", "path": "`+outside+`"}`, "--workspace", ws)
		if !strings.Contains(string(r.Output), "wrote") {
			t.Fatalf("%s", res)
		}
		if _, err := os.Stat(outside); err == nil {
			os.Remove(outside)
			t.Errorf("a file written in the sandbox's /tmp appeared on the host at %s", outside)
		}
		// The host's workspace path is not the sandbox's /workspace: writing
		// to the host path fails.
		r, res = m.skillRun(t, 0, m.probe(), `{"mode": "write", "path": "`+filepath.Join(ws, "direct.txt")+`"}`, "--workspace", ws)
		if !strings.Contains(string(r.Output), "error") {
			t.Errorf("host path writable from the sandbox\n%s", res)
		}
		r, res = m.skillRun(t, 0, m.probe(), `{"mode": "write", "path": "/workspace/in.txt", "content": "ok"}`, "--workspace", ws)
		if b, err := os.ReadFile(filepath.Join(ws, "in.txt")); err != nil || string(b) != "ok" {
			t.Errorf("workspace write not on the host: %q %v\n%s", b, err, res)
		}
	})
}

func TestStops(t *testing.T) {
	forEachMode(t, func(t *testing.T, m *mode) {
		start := time.Now()
		r, res := m.skillRun(t, 4, m.probe(), `{"mode": "sleep"}`, "--timeout", "1s")
		if r.StoppedReason != "timeout" || r.OK || r.Limits.TimeoutMS != 1000 {
			t.Errorf("timeout\n%s", res)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("timeout of 1s took %v", d)
		}
		r, res = m.skillRun(t, 7, m.probe(), `{"mode": "spam"}`, "--output-limit", "64k")
		if r.StoppedReason != "output_limit" {
			t.Errorf("output limit\n%s", res)
		}
		// Rootless without delegated cgroups, rlimits stand in: the same
		// stops, with the mechanism in the result.
		rootlessNoCgroups := false
		if m.uid != 0 {
			r, res = m.skillRun(t, 0, m.probe(), `{"mode": "report"}`, "--memory", "64Mi")
			rootlessNoCgroups = !r.Limits.Cgroups
			if rootlessNoCgroups && (r.Limits.MemoryBytes == nil || r.Limits.Enforcement["memory"].EnforcedBy != "rlimit_as" || !strings.Contains(strings.Join(r.Limits.NotEnforced, ","), "cpus")) {
				t.Errorf("rootless limits without cgroups\n%s", res)
			}
		}
		r, res = m.skillRun(t, 5, m.probe(), `{"mode": "hog"}`, "--memory", "64Mi")
		if r.StoppedReason != "memory" || *r.Limits.MemoryBytes != 64<<20 {
			t.Errorf("oom\n%s", res)
		}
		if rootlessNoCgroups && r.Limits.Enforcement["pids"].EnforcedBy == "none" {
			t.Log("pids limit: not enforced rootless on this kernel (RLIMIT_NPROC is not counted per user namespace before Linux 5.14); the result says so")
			return
		}
		r, res = m.skillRun(t, 3, m.probe(), `{"mode": "threads"}`, "--pids", "16")
		if r.StoppedReason != "pids" || !strings.Contains(r.Stderr, "can't start new thread") {
			t.Errorf("pids\n%s", res)
		}
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
