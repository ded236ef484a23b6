//go:build integration

// Package openshell_test drives `skillrun openshell-driver` the way
// OpenShell's gateway does: a gRPC client on the driver's Unix socket,
// every RPC, with a stand-in supervisor binary and an OCI image layout
// the test builds (the host's static busybox). Verdicts come from the
// host: container state through the skillrun CLI, files in the state
// directory, cgroup files.
package openshell_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/tests/internal/hostcheck"
)

var (
	binary    string
	repo      string
	binaryErr error
)

func TestMain(m *testing.M) {
	wd, _ := os.Getwd()
	repo = filepath.Clean(filepath.Join(wd, "..", ".."))
	binary, binaryErr = hostcheck.SkillrunBinary(repo)
	if binaryErr == nil && os.Geteuid() == 0 {
		// Containers whose driver was killed are re-parented to us: reap
		// them so their exit can be observed.
		binaryErr = hostcheck.Subreap(binary)
	}
	os.Exit(m.Run())
}

// env is one driver's world: its directories and its process, the
// stand-in gateway its sandboxes dial and a trap listener they must not
// reach.
type env struct {
	t                                  *testing.T
	dir, root, state, images, sock, sv string
	imagesArg                          string // --images, if not images
	cmd                                *exec.Cmd
	log                                *bytes.Buffer
	conn                               *grpc.ClientConn
	c                                  pb.ComputeDriverClient
	pki                                *pki
	gw                                 *gatewayStandIn
	trap                               *trap
}

// endpoint is the gateway URL the driver gives its sandboxes.
func (e *env) endpoint() string {
	return fmt.Sprintf("https://host.openshell.internal:%d", e.gw.port)
}

func needRoot(t *testing.T) {
	t.Helper()
	if binaryErr != nil {
		t.Skipf("skillrun binary: %v", binaryErr)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (creates containers)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("needs /bin/busybox (busybox-static, hack/install-deps.sh test)")
	}
}

func newEnv(t *testing.T) *env {
	needRoot(t)
	dir, err := os.MkdirTemp("", "openshell-driver-")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, root: filepath.Join(dir, "root"), state: filepath.Join(dir, "state"),
		images: filepath.Join(dir, "images"), sock: filepath.Join(dir, "run", "driver.sock"), sv: filepath.Join(dir, "supervisor")}
	t.Cleanup(func() {
		e.stopDriver(syscall.SIGTERM)
		// Whatever a failed test left: containers, then files.
		out, _ := exec.Command(binary, "--root", e.root, "list", "-q").Output()
		for _, id := range strings.Fields(string(out)) {
			exec.Command(binary, "--root", e.root, "delete", "-f", id).Run()
		}
		if os.Getenv("KEEP_TEST_FILES") == "" {
			os.RemoveAll(dir)
		}
	})
	build := exec.Command("go", "build", "-o", e.sv, "./testdata/supervisor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stand-in supervisor: %v\n%s", err, out)
	}
	if err := writeLayout(e.images, "busybox:test"); err != nil {
		t.Fatal(err)
	}
	e.pki = newPKI(t, filepath.Join(dir, "tls"))
	e.gw = startGateway(t, e.pki)
	e.trap = startTrap(t)
	e.startDriver()
	return e
}

func (e *env) startDriver() {
	t := e.t
	e.log = &bytes.Buffer{}
	images := e.images
	if e.imagesArg != "" {
		images = e.imagesArg
	}
	e.cmd = exec.Command(binary, "--root", e.root, "openshell-driver", "--socket", e.sock,
		"--state", e.state, "--images", images, "--supervisor-bin", e.sv,
		"--endpoint", e.endpoint(), "--tls-dir", e.pki.dir, "--default-image", "busybox:test")
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Until the socket accepts: a SIGKILLed driver leaves its socket file
	// behind, refusing connections until the new driver replaces it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", e.sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("driver did not listen on %s: %s", e.sock, e.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+e.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e.conn, e.c = conn, pb.NewComputeDriverClient(conn)
}

func (e *env) stopDriver(sig syscall.Signal) {
	if e.conn != nil {
		e.conn.Close()
		e.conn = nil
	}
	if e.cmd == nil {
		return
	}
	e.cmd.Process.Signal(sig)
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		e.cmd.Process.Kill()
		<-done
		e.t.Errorf("driver did not stop on %v", sig)
	}
	e.cmd = nil
}

// writeLayout writes an OCI image layout holding the image ref, whose
// single layer is the host's static busybox with an sh link, and
// "stuck:test", whose layer never arrives.
func writeLayout(dir, ref string) error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	put := func(data []byte) (string, int64, error) {
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		return "sha256:" + h, int64(len(data)), os.WriteFile(filepath.Join(blobs, h), data, 0o644)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, d := range []string{"bin/", "tmp/", "etc/", "proc/", "sys/", "dev/", "root/", "run/"} {
		tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	for _, l := range []string{"sh", "cat", "echo", "ls", "sleep", "id", "stat"} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ldig, lsize, err := put(layer.Bytes())
	if err != nil {
		return err
	}
	cfg, _ := json.Marshal(map[string]any{
		"architecture": goarch(), "os": "linux",
		"config": map[string]any{"Env": []string{"IMAGE_VAR=from-image", "OPENSHELL_SANDBOX_TOKEN=baked-in", "OPENSHELL_GATEWAY_TLS_SERVER_NAME=evil.example"}, "User": "65534:65534"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{ldig}},
	})
	cdig, csize, err := put(cfg)
	if err != nil {
		return err
	}
	man, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csize},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ldig, "size": lsize}},
	})
	mdig, msize, err := put(man)
	if err != nil {
		return err
	}
	// "stuck:test": its layer blob is a FIFO nobody writes, so a create
	// of it blocks while unpacking (the driver can be killed mid-create).
	stuckLayer := "sha256:" + strings.Repeat("5", 64)
	if err := syscall.Mkfifo(filepath.Join(blobs, strings.Repeat("5", 64)), 0o644); err != nil {
		return err
	}
	sman, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig, "size": csize},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": stuckLayer, "size": 1024}},
	})
	sdig, ssize, err := put(sman)
	if err != nil {
		return err
	}
	idx, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{
			map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdig, "size": msize,
				"annotations": map[string]string{"org.opencontainers.image.ref.name": ref}},
			map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sdig, "size": ssize,
				"annotations": map[string]string{"org.opencontainers.image.ref.name": "stuck:test"}},
		},
	})
	if err := os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

func goarch() string {
	out, _ := exec.Command("go", "env", "GOARCH").Output()
	return strings.TrimSpace(string(out))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func sandbox(id string) *pb.DriverSandbox {
	return &pb.DriverSandbox{
		Id: id, Name: "name-" + id, Workspace: "ws1",
		Spec: &pb.DriverSandboxSpec{
			LogLevel:     "debug",
			Environment:  map[string]string{"SPEC_VAR": "spec", "BOTH": "spec"},
			SandboxToken: "token-of-" + id,
			Command:      []string{"/bin/sh", "-c", "echo main"},
			Template: &pb.DriverSandboxTemplate{
				Image:       "busybox:test",
				Environment: map[string]string{"TMPL_VAR": "tmpl", "BOTH": "tmpl"},
				Labels:      map[string]string{"team": "a"},
				Resources:   &pb.DriverResourceRequirements{CpuLimit: "500m", MemoryLimit: "64Mi", MemoryRequest: "32Mi"},
			},
		},
	}
}

// ready waits until the sandbox's Ready condition is want.
func (e *env) waitReady(id, reason string) *pb.DriverSandbox {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.c.GetSandbox(ctx(e.t), &pb.GetSandboxRequest{SandboxId: id})
		if err == nil {
			cond := r.GetSandbox().GetStatus().GetConditions()
			if len(cond) == 1 && cond[0].GetType() == "Ready" && cond[0].GetReason() == reason {
				return r.GetSandbox()
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("sandbox %s: conditions %v, want reason %s\n%s", id, cond, reason, e.log)
			}
		} else if time.Now().After(deadline) {
			e.t.Fatalf("sandbox %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// containerStatus is the container's status as `skillrun state` reports
// it, "" when it does not exist.
func (e *env) containerStatus(id string) string {
	out, err := exec.Command(binary, "--root", e.root, "state", "openshell-"+id).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	json.Unmarshal(out, &st)
	return st.Status
}

func (e *env) containerPid(id string) int {
	out, err := exec.Command(binary, "--root", e.root, "state", "openshell-"+id).Output()
	if err != nil {
		e.t.Fatalf("state of %s: %v", id, err)
	}
	var st struct{ Pid int }
	json.Unmarshal(out, &st)
	return st.Pid
}

func (e *env) exec(id string, args ...string) (string, error) {
	out, err := exec.Command(binary, append([]string{"--root", e.root, "exec", "openshell-" + id}, args...)...).CombinedOutput()
	return string(out), err
}

func code(t *testing.T, err error, want codes.Code, what string) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// watcher collects a WatchSandboxes stream.
type watcher struct {
	mu     sync.Mutex
	events []*pb.WatchSandboxesEvent
}

func (e *env) watch() *watcher {
	w := &watcher{}
	c, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	stream, err := e.c.WatchSandboxes(c, &pb.WatchSandboxesRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	}()
	return w
}

// reasons lists, in order, the Ready reasons seen for id ("deleted" for
// its deletion event), without repeats.
func (w *watcher) reasons(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, ev := range w.events {
		r := ""
		if s := ev.GetSandbox().GetSandbox(); s.GetId() == id {
			r = s.GetStatus().GetConditions()[0].GetReason()
		} else if ev.GetDeleted().GetSandboxId() == id {
			r = "deleted"
		}
		if r != "" && (len(out) == 0 || out[len(out)-1] != r) {
			out = append(out, r)
		}
	}
	return out
}

// deleting is the first snapshot of id whose reason is Deleting.
func (w *watcher) deleting(id string) *pb.DriverSandbox {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.events {
		if s := ev.GetSandbox().GetSandbox(); s.GetId() == id && s.GetStatus().GetConditions()[0].GetReason() == "Deleting" {
			return s
		}
	}
	return nil
}

func (w *watcher) waitFor(t *testing.T, id, reason string) {
	t.Helper()
	w.waitForN(t, id, reason, 1)
}

// waitForN waits until the watch reported reason for id n times (not
// counting repeats).
func (w *watcher) waitForN(t *testing.T, id, reason string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		seen := 0
		for _, r := range w.reasons(id) {
			if r == reason {
				seen++
			}
		}
		if seen >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("watch: not %d x %s for %s; saw %v", n, reason, id, w.reasons(id))
}

type supervisorRecord struct {
	Args         []string          `json:"args"`
	Env          []string          `json:"env"`
	TokenMode    string            `json:"token_mode"`
	Token        string            `json:"token"`
	SelfWriteErr string            `json:"self_write_err"`
	SetuidOut    string            `json:"setuid_out"`
	SetuidErr    string            `json:"setuid_err"`
	NetnsMount   string            `json:"netns_mount_err"`
	ChownErr     string            `json:"chown_err"`
	KeyctlErr    string            `json:"keyctl_err"`
	Hosts        string            `json:"/etc/hosts"`
	Resolv       string            `json:"/etc/resolv.conf"`
	Network      map[string]string `json:"network"`
	Resolved     map[string]string `json:"resolved"`
	TLSFiles     map[string]string `json:"tls_files"`
	Probes       map[string]string `json:"probes"`
	Stream       string            `json:"stream"`
	StreamErr    string            `json:"stream_err"`
}

// checkSupervisorNetwork: OpenShell's own network setup worked in the
// sandbox's network namespace (behind the egress allowlist), each step as
// the stand-in reported it.
func checkSupervisorNetwork(t *testing.T, rec supervisorRecord) {
	t.Helper()
	for step, want := range map[string]string{
		"ip netns add":                 "ok",
		"veth pair":                    "ok",
		"move veth into the netns":     "ok",
		"address 10.200.0.1/24":        "ok",
		"address 10.200.0.2/24":        "ok",
		"default route via 10.200.0.1": "ok",
		"proxy listen 10.200.0.1:3128": "ok",
		"nftables table, NAT chain and redirect rule in the netns": "ok",
		"listen 0.0.0.0:15001 in the netns":                        "ok",
		"redirected 192.0.2.1:443":                                 "transparent",
		"proxy from the netns":                                     "proxy",
	} {
		if got := rec.Network[step]; got != want {
			t.Errorf("supervisor network setup %q: %q, want %q", step, got, want)
		}
	}
}

// supervisorCaps is what OpenShell's Docker driver gets from Docker for
// the supervisor: Docker's default capabilities plus its cap_add
// (SYS_ADMIN, NET_ADMIN, SYS_PTRACE, SYSLOG).
var supervisorCaps = []int{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD, unix.CAP_NET_RAW,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE,
	unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SYSLOG,
}

// checkSupervisorPrivileges compares, from the host, the supervisor's
// /proc/PID/status with the Docker driver's contract (capability sets,
// no_new_privs off, a seccomp filter) and checks what the stand-in could
// do with them in the sandbox.
func checkSupervisorPrivileges(t *testing.T, e *env, id string, rec supervisorRecord) {
	t.Helper()
	var want uint64
	for _, c := range supervisorCaps {
		want |= 1 << c
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", e.containerPid(id)))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	for k, v := range map[string]string{
		"CapBnd": fmt.Sprintf("%016x", want), "CapEff": fmt.Sprintf("%016x", want), "CapPrm": fmt.Sprintf("%016x", want),
		"CapInh": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "0", "Seccomp": "2",
	} {
		if status[k] != v {
			t.Errorf("supervisor %s: %s, want %s", k, status[k], v)
		}
	}
	// No rlimits of its own: as under Docker, the supervisor inherits
	// its driver's (runc's example spec would cap open files at 1024).
	if e.cmd != nil {
		lim := func(pid int) string {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "Max open files") {
					return strings.Join(strings.Fields(l), " ")
				}
			}
			return "?"
		}
		if got, want := lim(e.containerPid(id)), lim(e.cmd.Process.Pid); got != want {
			t.Errorf("supervisor %s, driver %s: want the driver's", got, want)
		}
	}
	if rec.SetuidOut != "65534" {
		t.Errorf("the supervisor cannot switch to another user: %q %s", rec.SetuidOut, rec.SetuidErr)
	}
	if rec.NetnsMount != "<nil> " {
		t.Errorf("the supervisor cannot mount in new mount and network namespaces: %s", rec.NetnsMount)
	}
	if rec.ChownErr != "<nil>" {
		t.Errorf("the supervisor cannot chown: %s", rec.ChownErr)
	}
	// Docker's profile denies keyctl whatever the capabilities; the
	// control: the host allows it here (the container has its own
	// session keyring, so without the filter it would succeed).
	if _, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0); err != nil {
		t.Logf("keyctl fails on the host itself (%v): the in-sandbox keyctl check proves nothing here", err)
	} else if rec.KeyctlErr != "operation not permitted" {
		t.Errorf("keyctl in the sandbox: %q, want EPERM from Docker's seccomp profile", rec.KeyctlErr)
	}
}

func (e *env) supervisorRecord(id string) supervisorRecord {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.state, "sandboxes", id, "workspace", "supervisor.json"))
	if err != nil {
		e.t.Fatalf("the supervisor left no record in the workspace: %v", err)
	}
	var r supervisorRecord
	if err := json.Unmarshal(data, &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

func TestOpenShellDriverLifecycle(t *testing.T) {
	e := newEnv(t)
	w := e.watch()

	caps, err := e.c.GetCapabilities(ctx(t), &pb.GetCapabilitiesRequest{})
	if err != nil || caps.GetDriverName() != "skillrun" || caps.GetDefaultImage() != "busybox:test" || !caps.GetGatewayManagesLifecycle() {
		t.Fatalf("GetCapabilities: %v %v", caps, err)
	}
	if r, err := e.c.GetGatewayListenerRequirements(ctx(t), &pb.GetGatewayListenerRequirementsRequest{}); err != nil || len(r.GetRequirements()) != 1 || r.GetRequirements()[0].GetLoopbackInterface() == nil {
		t.Fatalf("GetGatewayListenerRequirements: %v %v; want the loopback listener", r, err)
	}
	if _, err := e.c.EnsureWorkspace(ctx(t), &pb.EnsureWorkspaceRequest{Workspace: "ws1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.EnsureWorkspace(ctx(t), &pb.EnsureWorkspaceRequest{Workspace: "ws1"}); err != nil {
		t.Fatalf("EnsureWorkspace is not idempotent: %v", err)
	}
	if _, err := e.c.ValidateSandboxCreate(ctx(t), &pb.ValidateSandboxCreateRequest{Sandbox: sandbox("sb1")}); err != nil {
		t.Fatalf("ValidateSandboxCreate of a good sandbox: %v", err)
	}

	// Create -> Ready.
	if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox("sb1")}); err != nil {
		t.Fatalf("CreateSandbox: %v\n%s", err, e.log)
	}
	sb := e.waitReady("sb1", "BackendReady")
	if c := sb.GetStatus().GetConditions()[0]; c.GetStatus() != "True" || sb.GetStatus().GetInstanceId() != "openshell-sb1" || sb.GetStatus().GetSandboxName() != "name-sb1" {
		t.Errorf("status %v", sb.GetStatus())
	}
	if sb.GetSpec().GetSandboxToken() != "" {
		t.Error("GetSandbox echoes the sandbox token")
	}
	if st := e.containerStatus("sb1"); st != "running" {
		t.Fatalf("container status %q, want running", st)
	}
	code(t, func() error {
		_, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox("sb1")})
		return err
	}(), codes.AlreadyExists, "second CreateSandbox")

	// What the supervisor got, as it recorded it in the workspace (a host
	// directory we read directly).
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Complete, not merely created: the supervisor may be writing it.
		if b, err := os.ReadFile(filepath.Join(e.state, "sandboxes", "sb1", "workspace", "supervisor.json")); (err == nil && json.Valid(b)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec := e.supervisorRecord("sb1")
	if strings.Join(rec.Args, " ") != "/opt/openshell/bin/openshell-sandbox --workdir /sandbox" {
		t.Errorf("supervisor args %q", rec.Args)
	}
	envm := map[string]string{}
	for _, kv := range rec.Env {
		k, v, _ := strings.Cut(kv, "=")
		envm[k] = v
	}
	for k, want := range map[string]string{
		"OPENSHELL_ENDPOINT":           e.endpoint(),
		"OPENSHELL_TLS_CA":             "/etc/openshell/tls/client/ca.crt",
		"OPENSHELL_TLS_CERT":           "/etc/openshell/tls/client/tls.crt",
		"OPENSHELL_TLS_KEY":            "/etc/openshell/tls/client/tls.key",
		"OPENSHELL_OCI_IMAGE_USER":     "65534:65534",
		"OPENSHELL_SANDBOX_UID":        "",
		"OPENSHELL_SANDBOX_GID":        "",
		"OPENSHELL_SANDBOX_ID":         "sb1",
		"OPENSHELL_SANDBOX":            "name-sb1",
		"OPENSHELL_LOG_LEVEL":          "debug",
		"OPENSHELL_SANDBOX_TOKEN_FILE": "/etc/openshell/auth/sandbox.jwt",
		"OPENSHELL_MAIN_PROCESS_SPEC":  `{"version":1,"command":["/bin/sh","-c","echo main"],"tty":false}`,
		"OPENSHELL_USER_ENVIRONMENT":   `{"BOTH":"spec","SPEC_VAR":"spec","TMPL_VAR":"tmpl"}`,
		"SPEC_VAR":                     "spec", "TMPL_VAR": "tmpl", "BOTH": "spec", "IMAGE_VAR": "from-image",
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	} {
		if envm[k] != want {
			t.Errorf("supervisor env %s=%q, want %q", k, envm[k], want)
		}
	}
	for _, k := range []string{"OPENSHELL_SANDBOX_TOKEN", "OPENSHELL_GATEWAY_TLS_SERVER_NAME"} {
		if v, ok := envm[k]; ok {
			t.Errorf("the image's %s=%q reached the supervisor", k, v)
		}
	}
	for _, k := range []string{"OPENSHELL_SANDBOX_UID", "OPENSHELL_SANDBOX_GID", "OPENSHELL_OCI_IMAGE_USER"} {
		if _, ok := envm[k]; !ok {
			t.Errorf("%s is not set (the Docker driver sets it)", k)
		}
	}
	if rec.Token != "token-of-sb1" || rec.TokenMode != "400" {
		t.Errorf("token file: %q mode %s", rec.Token, rec.TokenMode)
	}
	checkSupervisorNetwork(t, rec)
	if !strings.HasPrefix(rec.Stream, "open") {
		t.Errorf("the supervisor holds no stream to the gateway: %q %q", rec.Stream, rec.StreamErr)
	}
	if !strings.Contains(rec.SelfWriteErr, "read-only file system") {
		t.Errorf("the supervisor binary is writable in the sandbox: %s", rec.SelfWriteErr)
	}
	// From the host: the supervisor's mount in the container is read-only.
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", e.containerPid("sb1")))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/opt/openshell/bin/openshell-sandbox" {
			found = true
			if !strings.Contains(","+f[5]+",", ",ro,") {
				t.Errorf("supervisor mount is not read-only: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no supervisor mount in the sandbox's mountinfo")
	}
	checkSupervisorPrivileges(t, e, "sb1", rec)
	// The token on the host: 0400, in a 0700 directory.
	fi, err := os.Stat(filepath.Join(e.state, "sandboxes", "sb1", "auth", "sandbox.jwt"))
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("host token file: %v %v", fi, err)
	}
	if data, _ := os.ReadFile(filepath.Join(e.state, "sandboxes", "sb1", "sandbox.json")); bytes.Contains(data, []byte("token-of-sb1")) {
		t.Error("the sandbox record on disk holds the token")
	}

	// Resources: the memory cgroup of the container's init, from the host.
	checkMemoryLimit(t, e, "sb1", 64<<20)
	checkCPUQuota(t, e, "sb1", "50000")
	checkPidsLimit(t, e, "sb1", "2048")

	// skillrun exec into the sandbox; the write lands in the workspace.
	out, err := e.exec("sb1", "/bin/sh", "-c", "echo persisted > /sandbox/file; cat /proc/1/cmdline | tr '\\0' ' '")
	if err != nil || !strings.Contains(out, "/opt/openshell/bin/openshell-sandbox --workdir /sandbox") {
		t.Fatalf("skillrun exec: %v %q", err, out)
	}

	// Stop: container gone, workspace kept; idempotent.
	for i := 0; i < 2; i++ {
		if _, err := e.c.StopSandbox(ctx(t), &pb.StopSandboxRequest{SandboxId: "sb1"}); err != nil {
			t.Fatalf("StopSandbox #%d: %v", i+1, err)
		}
	}
	e.waitReady("sb1", "ContainerExited")
	if st := e.containerStatus("sb1"); st != "" {
		t.Errorf("container still exists after StopSandbox: %s", st)
	}
	if data, err := os.ReadFile(filepath.Join(e.state, "sandboxes", "sb1", "workspace", "file")); err != nil || string(data) != "persisted\n" {
		t.Errorf("workspace after stop: %q %v", data, err)
	}

	// Start (by name) re-creates it from the bundle; idempotent.
	for i := 0; i < 2; i++ {
		if _, err := e.c.StartSandbox(ctx(t), &pb.StartSandboxRequest{SandboxName: "name-sb1"}); err != nil {
			t.Fatalf("StartSandbox #%d: %v\n%s", i+1, err, e.log)
		}
	}
	e.waitReady("sb1", "BackendReady")
	if out, err := e.exec("sb1", "cat", "/sandbox/file"); err != nil || out != "persisted\n" {
		t.Errorf("workspace after start: %q %v", out, err)
	}

	// The container's main process exits on its own: the watch sees it.
	if err := exec.Command(binary, "--root", e.root, "kill", "openshell-sb1", "TERM").Run(); err != nil {
		t.Fatal(err)
	}
	// A change from outside is seen by the watch's next look (it is
	// level-triggered): wait for it before undoing it with a start.
	w.waitForN(t, "sb1", "ContainerExited", 2)
	e.waitReady("sb1", "ContainerExited")
	if _, err := e.c.StartSandbox(ctx(t), &pb.StartSandboxRequest{SandboxId: "sb1"}); err != nil {
		t.Fatal(err)
	}
	e.waitReady("sb1", "BackendReady")

	l, err := e.c.ListSandboxes(ctx(t), &pb.ListSandboxesRequest{})
	if err != nil || len(l.GetSandboxes()) != 1 || l.GetSandboxes()[0].GetId() != "sb1" {
		t.Fatalf("ListSandboxes: %v %v", l, err)
	}
	code(t, func() error {
		_, err := e.c.DeleteWorkspace(ctx(t), &pb.DeleteWorkspaceRequest{Workspace: "ws1"})
		return err
	}(), codes.FailedPrecondition, "DeleteWorkspace with a sandbox in it")

	// Delete, twice.
	d, err := e.c.DeleteSandbox(ctx(t), &pb.DeleteSandboxRequest{SandboxId: "sb1"})
	if err != nil || !d.GetDeleted() {
		t.Fatalf("DeleteSandbox: %v %v", d, err)
	}
	d, err = e.c.DeleteSandbox(ctx(t), &pb.DeleteSandboxRequest{SandboxId: "sb1"})
	if err != nil || d.GetDeleted() {
		t.Fatalf("second DeleteSandbox: %v %v", d, err)
	}
	if st := e.containerStatus("sb1"); st != "" {
		t.Errorf("container exists after DeleteSandbox: %s", st)
	}
	if _, err := os.Lstat(filepath.Join(e.state, "sandboxes", "sb1")); err == nil {
		t.Error("sandbox directory left after DeleteSandbox")
	}
	code(t, func() error { _, err := e.c.GetSandbox(ctx(t), &pb.GetSandboxRequest{SandboxId: "sb1"}); return err }(), codes.NotFound, "GetSandbox after delete")
	code(t, func() error { _, err := e.c.StopSandbox(ctx(t), &pb.StopSandboxRequest{SandboxId: "sb1"}); return err }(), codes.NotFound, "StopSandbox after delete")
	code(t, func() error {
		_, err := e.c.StartSandbox(ctx(t), &pb.StartSandboxRequest{SandboxId: "sb1"})
		return err
	}(), codes.NotFound, "StartSandbox after delete")
	if _, err := e.c.DeleteWorkspace(ctx(t), &pb.DeleteWorkspaceRequest{Workspace: "ws1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(e.state, "workspaces", "ws1")); err == nil {
		t.Error("workspace directory left after DeleteWorkspace")
	}

	// The watch stream saw every transition, in order, the transient ones
	// of the driver's own mutations (Starting, Deleting) included: create,
	// stop, start, the container exiting, start, delete.
	w.waitFor(t, "sb1", "deleted")
	got := strings.Join(w.reasons("sb1"), " ")
	if want := "Starting BackendReady ContainerExited BackendReady ContainerExited BackendReady Deleting deleted"; got != want {
		t.Errorf("watch reasons for sb1:\n got %s\nwant %s", got, want)
	}
	if ev := w.deleting("sb1"); ev == nil || !ev.GetStatus().GetDeleting() {
		t.Errorf("the Deleting snapshot does not say deleting=true: %v", ev)
	}
}

// checkMemoryLimit: the memory limit in the memory cgroup of the
// container's init.
func checkMemoryLimit(t *testing.T, e *env, id string, want int64) {
	t.Helper()
	checkCgroup(t, e, id, "memory", func(v2 bool, ctrls, path string) ([]string, string) {
		switch {
		case v2:
			return []string{filepath.Join("/sys/fs/cgroup", path, "memory.max"), filepath.Join("/sys/fs/cgroup/unified", path, "memory.max")}, fmt.Sprint(want)
		case strings.Contains(","+ctrls+",", ",memory,"):
			return []string{filepath.Join("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes")}, fmt.Sprint(want)
		}
		return nil, ""
	})
}

// checkPidsLimit: the Docker driver's default sandbox_pids_limit, in the
// pids cgroup of the container's init.
func checkPidsLimit(t *testing.T, e *env, id, want string) {
	t.Helper()
	checkCgroup(t, e, id, "pids", func(v2 bool, ctrls, path string) ([]string, string) {
		switch {
		case strings.Contains(","+ctrls+",", ",pids,"):
			return []string{filepath.Join("/sys/fs/cgroup/pids", path, "pids.max")}, want
		case v2:
			return []string{filepath.Join("/sys/fs/cgroup", path, "pids.max"), filepath.Join("/sys/fs/cgroup/unified", path, "pids.max")}, want
		}
		return nil, ""
	})
}

// checkCPUQuota: cpu_limit 500m is a CFS quota of 50000us per 100000us.
func checkCPUQuota(t *testing.T, e *env, id, want string) {
	t.Helper()
	checkCgroup(t, e, id, "cpu", func(v2 bool, ctrls, path string) ([]string, string) {
		switch {
		case v2:
			return []string{filepath.Join("/sys/fs/cgroup", path, "cpu.max")}, want + " 100000"
		case strings.Contains(","+ctrls+",", ",cpu,"):
			return []string{filepath.Join("/sys/fs/cgroup/cpu,cpuacct", path, "cpu.cfs_quota_us"), filepath.Join("/sys/fs/cgroup/cpu", path, "cpu.cfs_quota_us")}, want
		}
		return nil, ""
	})
}

// checkCgroup compares a limit in the cgroups of the container's init:
// for each line of /proc/PID/cgroup (v2 is the "0::" line), files names
// the candidate files and the value wanted; the first file that can be
// read, on the first line that has one, is compared.
func checkCgroup(t *testing.T, e *env, id, what string, files func(v2 bool, ctrls, path string) ([]string, string)) {
	t.Helper()
	pid := e.containerPid(id)
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		cands, want := files(parts[0] == "0" && parts[1] == "", parts[1], parts[2])
		for _, f := range cands {
			if b, err := os.ReadFile(f); err == nil {
				if strings.TrimSpace(string(b)) != want {
					t.Errorf("%s = %s, want %s", f, b, want)
				}
				return
			}
		}
	}
	t.Errorf("no %s cgroup file found for pid %d: %s", what, pid, data)
}

func TestOpenShellDriverBadRequests(t *testing.T) {
	e := newEnv(t)
	mod := func(f func(*pb.DriverSandbox)) *pb.DriverSandbox { s := sandbox("bad"); f(s); return s }
	inv, pre := codes.InvalidArgument, codes.FailedPrecondition
	cases := map[string]struct {
		sb    *pb.DriverSandbox
		code  codes.Code
		field string
	}{
		"no sandbox":    {nil, inv, "sandbox:"},
		"no id":         {mod(func(s *pb.DriverSandbox) { s.Id = "" }), inv, "sandbox.id"},
		"path in id":    {mod(func(s *pb.DriverSandbox) { s.Id = "../../etc" }), inv, "sandbox.id"},
		"no name":       {mod(func(s *pb.DriverSandbox) { s.Name = "" }), inv, "sandbox.name"},
		"unknown image": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Image = "nosuch:1" }), pre, "sandbox.spec.template.image"},
		"bad cpu limit": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.CpuLimit = "lots" }), pre, "sandbox.spec.template.resources.cpu_limit"},
		"bad memory":    {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.MemoryLimit = "-1Gi" }), pre, "sandbox.spec.template.resources.memory_limit"},
		// Below what the kernel and the runtime apply: refused by
		// Validate, not Internal at Create (the cgroup write).
		"cpu limit 1m":     {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.CpuLimit = "1m" }), pre, "sandbox.spec.template.resources.cpu_limit"},
		"memory limit 1m":  {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.MemoryLimit = "1m" }), pre, "sandbox.spec.template.resources.memory_limit"},
		"memory limit 4Ki": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.MemoryLimit = "4Ki" }), pre, "sandbox.spec.template.resources.memory_limit"},
		"memory limit 3Mi": {mod(func(s *pb.DriverSandbox) { s.Spec.Template.Resources.MemoryLimit = "3Mi" }), pre, "sandbox.spec.template.resources.memory_limit"},
		"gpu": {mod(func(s *pb.DriverSandbox) {
			s.Spec.ResourceRequirements = &pb.ResourceRequirements{Gpu: &pb.GpuResourceRequirements{}}
		}), pre, "sandbox.spec.resource_requirements.gpu"},
		"env with =":     {mod(func(s *pb.DriverSandbox) { s.Spec.Environment["A=B"] = "x" }), inv, "sandbox.spec.environment"},
		"empty command0": {mod(func(s *pb.DriverSandbox) { s.Spec.Command = []string{""} }), inv, "sandbox.spec.command[0]"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, verr := e.c.ValidateSandboxCreate(ctx(t), &pb.ValidateSandboxCreateRequest{Sandbox: c.sb})
			_, cerr := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: c.sb})
			for what, err := range map[string]error{"ValidateSandboxCreate": verr, "CreateSandbox": cerr} {
				if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), c.field) {
					t.Errorf("%s: %v; want %v naming %s", what, err, c.code, c.field)
				}
			}
		})
	}
	// Nothing left behind.
	if ents, _ := os.ReadDir(filepath.Join(e.state, "sandboxes")); len(ents) != 0 {
		t.Errorf("state left by refused creates: %v", ents)
	}
	if out, _ := exec.Command(binary, "--root", e.root, "list", "-q").Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("containers left by refused creates: %s", out)
	}
	for name, err := range map[string]error{
		"GetSandbox without id or name": func() error { _, err := e.c.GetSandbox(ctx(t), &pb.GetSandboxRequest{}); return err }(),
		"DeleteSandbox without id":      func() error { _, err := e.c.DeleteSandbox(ctx(t), &pb.DeleteSandboxRequest{}); return err }(),
		"bad workspace name": func() error {
			_, err := e.c.EnsureWorkspace(ctx(t), &pb.EnsureWorkspaceRequest{Workspace: "../x"})
			return err
		}(),
	} {
		code(t, err, codes.InvalidArgument, name)
	}
	code(t, func() error { _, err := e.c.GetSandbox(ctx(t), &pb.GetSandboxRequest{SandboxId: "nosuch"}); return err }(), codes.NotFound, "GetSandbox of an unknown ID")
	code(t, func() error {
		_, err := e.c.GetSandbox(ctx(t), &pb.GetSandboxRequest{SandboxName: "nosuch"})
		return err
	}(), codes.NotFound, "GetSandbox of an unknown name")
}

// TestOpenShellDriverConcurrentAndRestart creates sandboxes concurrently
// (some with the same ID), restarts the driver (SIGTERM, then SIGKILL)
// and checks that the new driver serves the same sandboxes.
func TestOpenShellDriverConcurrentAndRestart(t *testing.T) {
	e := newEnv(t)
	ids := []string{"c1", "c2", "c3", "c1", "c2"}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox(id)})
		}()
	}
	wg.Wait()
	ok := map[string]int{}
	for i, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			ok[ids[i]]++
		case codes.AlreadyExists:
		default:
			t.Fatalf("create %s: %v\n%s", ids[i], err, e.log)
		}
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		if ok[id] != 1 {
			t.Errorf("%s created %d times", id, ok[id])
		}
		e.waitReady(id, "BackendReady")
	}
	if _, err := e.c.StopSandbox(ctx(t), &pb.StopSandboxRequest{SandboxId: "c2"}); err != nil {
		t.Fatal(err)
	}

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		e.stopDriver(sig)
		// The containers outlive their driver.
		if st := e.containerStatus("c1"); st != "running" {
			t.Fatalf("after driver %v: c1 is %q", sig, st)
		}
		e.startDriver()
		e.waitReady("c1", "BackendReady")
		e.waitReady("c3", "BackendReady")
		e.waitReady("c2", "ContainerExited")
		l, err := e.c.ListSandboxes(ctx(t), &pb.ListSandboxesRequest{})
		if err != nil || len(l.GetSandboxes()) != 3 {
			t.Fatalf("after driver %v: ListSandboxes %v %v", sig, l, err)
		}
	}
	// The restarted driver starts and deletes what the first one created.
	if _, err := e.c.StartSandbox(ctx(t), &pb.StartSandboxRequest{SandboxId: "c2"}); err != nil {
		t.Fatal(err)
	}
	e.waitReady("c2", "BackendReady")
	if out, err := e.exec("c2", "echo", "hi"); err != nil || out != "hi\n" {
		t.Fatalf("exec in c2: %q %v", out, err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		if d, err := e.c.DeleteSandbox(ctx(t), &pb.DeleteSandboxRequest{SandboxId: id}); err != nil || !d.GetDeleted() {
			t.Fatalf("delete %s: %v %v", id, d, err)
		}
	}
	if out, _ := exec.Command(binary, "--root", e.root, "list", "-q").Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("containers left: %s", out)
	}
}

// TestOpenShellDriverReconcile: what a dead driver left half done is
// cleaned up when the next one starts, and only that: a sandbox directory
// whose create never finished, a sandbox whose delete began (record
// marked deleting, container still running), and a container named like
// a sandbox that has no sandbox (orphan); a healthy sandbox is kept.
func TestOpenShellDriverReconcile(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"keep", "mid", "orph"} {
		if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox(id)}); err != nil {
			t.Fatalf("create %s: %v\n%s", id, err, e.log)
		}
		e.waitReady(id, "BackendReady")
		// Running is not settled: the stand-in supervisor still sets up
		// (network, gateway probes) and then writes its record into its
		// workspace, exiting when it cannot. orph's folder, removed below,
		// takes that workspace: a supervisor still starting then exits,
		// and the planted orphan is found stopped (under load, in CI).
		e.waitRecord(id)
	}
	midPid, orphPid := e.containerPid("mid"), e.containerPid("orph")
	e.stopDriver(syscall.SIGKILL)
	// A sandbox outlives its driver (its egress helper lives on its own).
	if st := e.containerStatus("orph"); st != "running" {
		console, _ := os.ReadFile(filepath.Join(e.state, "sandboxes", "orph", "console.log"))
		t.Fatalf("sandbox orph is %q after its driver's SIGKILL, want running (init %d); its egress helpers: %v\nconsole.log:\n%s\ndriver log:\n%s",
			st, orphPid, hostcheck.Procs(func(args []string) bool {
				return len(args) > 1 && args[1] == "__skillrun-egress-helper" && slices.Contains(args, "openshell-orph")
			}), console, e.log)
	}

	half := filepath.Join(e.state, "sandboxes", "half")
	if err := os.MkdirAll(filepath.Join(half, "bundle"), 0o700); err != nil {
		t.Fatal(err)
	}
	// mid: the record says a delete began.
	recPath := filepath.Join(e.state, "sandboxes", "mid", "sandbox.json")
	var rec map[string]any
	data, err := os.ReadFile(recPath)
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec["deleting"] = true
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(recPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// orph: the container runs, its sandbox is gone.
	if err := os.RemoveAll(filepath.Join(e.state, "sandboxes", "orph")); err != nil {
		t.Fatal(err)
	}
	if st := e.containerStatus("orph"); st != "running" {
		t.Fatalf("planted orphan is %q, want running", st)
	}

	e.startDriver()
	// The socket exists from the start; the driver serves once it has
	// reconciled: the first answer means reconcile is done.
	l, err := e.c.ListSandboxes(ctx(t), &pb.ListSandboxesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.GetSandboxes()) != 1 || l.GetSandboxes()[0].GetId() != "keep" {
		t.Errorf("sandboxes after reconcile: %v, want only keep", l.GetSandboxes())
	}
	for _, p := range []string{half, filepath.Join(e.state, "sandboxes", "mid")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s kept by the restarted driver\n%s", p, e.log)
		}
	}
	for id, pid := range map[string]int{"mid": midPid, "orph": orphPid} {
		if st := e.containerStatus(id); st != "" {
			t.Errorf("container openshell-%s is %q after reconcile, want gone\n%s", id, st, e.log)
		}
		deadline := time.Now().Add(5 * time.Second)
		for hostcheck.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if hostcheck.Alive(pid) {
			t.Errorf("the init of openshell-%s (pid %d) still runs after reconcile", id, pid)
		}
	}
	e.waitReady("keep", "BackendReady")
	for _, want := range []string{"half", "mid", "openshell-orph"} {
		if !strings.Contains(e.log.String(), want) {
			t.Errorf("the driver's log does not mention cleaning up %s:\n%s", want, e.log)
		}
	}
}

// TestOpenShellDriverKilledDuringCreate: the driver is SIGKILLed while a
// CreateSandbox is unpacking (its image's layer never arrives); the watch
// saw Starting; the restarted driver removes the half-made sandbox and
// creates the same ID again.
func TestOpenShellDriverKilledDuringCreate(t *testing.T) {
	e := newEnv(t)
	w := e.watch()
	sb := sandbox("kd")
	sb.Spec.Template.Image = "stuck:test"
	done := make(chan error, 1)
	go func() {
		_, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sb})
		done <- err
	}()
	w.waitFor(t, "kd", "Starting")
	select {
	case err := <-done:
		t.Fatalf("CreateSandbox of the stuck image returned: %v", err)
	default:
	}
	if _, err := os.Lstat(filepath.Join(e.state, "sandboxes", "kd", "sandbox.json")); err != nil {
		t.Fatalf("no record of the create under way: %v", err)
	}
	e.stopDriver(syscall.SIGKILL)
	if err := <-done; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("CreateSandbox when its driver died: %v, want Unavailable", err)
	}

	e.startDriver()
	code(t, func() error { _, err := e.c.GetSandbox(ctx(t), &pb.GetSandboxRequest{SandboxId: "kd"}); return err }(), codes.NotFound, "GetSandbox of the killed create")
	if _, err := os.Lstat(filepath.Join(e.state, "sandboxes", "kd")); err == nil {
		t.Errorf("the killed create's directory was kept\n%s", e.log)
	}
	if st := e.containerStatus("kd"); st != "" {
		t.Errorf("container of the killed create: %q", st)
	}
	if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox("kd")}); err != nil {
		t.Fatalf("create kd again: %v\n%s", err, e.log)
	}
	e.waitReady("kd", "BackendReady")
}

// TestOpenShellDriverOCIArchive: --images may be an oci-archive (a tar
// of the layout, as skopeo's oci-archive: writes it); the driver unpacks
// it into its state directory and runs sandboxes from it.
func TestOpenShellDriverOCIArchive(t *testing.T) {
	e := newEnv(t)
	e.stopDriver(syscall.SIGTERM)
	archive := filepath.Join(e.dir, "images.tar")
	if err := tarDir(e.images, archive); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.images); err != nil {
		t.Fatal(err)
	}
	e.imagesArg = archive
	e.startDriver()
	if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sandbox("arc")}); err != nil {
		t.Fatalf("CreateSandbox from an oci-archive: %v\n%s", err, e.log)
	}
	e.waitReady("arc", "BackendReady")
	if out, err := e.exec("arc", "/bin/busybox", "echo", "from-archive"); err != nil || out != "from-archive\n" {
		t.Fatalf("exec: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(e.state, "image-archive", "index.json")); err != nil {
		t.Errorf("the archive was not unpacked into the state directory: %v", err)
	}
	code(t, func() error {
		_, err := e.c.ValidateSandboxCreate(ctx(t), &pb.ValidateSandboxCreateRequest{Sandbox: func() *pb.DriverSandbox {
			s := sandbox("arc2")
			s.Spec.Template.Image = "nosuch:1"
			return s
		}()})
		return err
	}(), codes.FailedPrecondition, "an image the archive does not hold")
}

// tarDir writes the regular files and directories under dir into a tar
// file at dst, with names relative to dir.
func tarDir(dir, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == dir || !(fi.IsDir() || fi.Mode().IsRegular()) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// TestOpenShellDriverGrpcurl calls the socket with grpcurl and the
// project's .proto, as an operator would (and as a second, independent
// client implementation).
func TestOpenShellDriverGrpcurl(t *testing.T) {
	needRoot(t)
	gc := os.Getenv("GRPCURL")
	if gc == "" {
		gc = filepath.Join(repo, "bin", "tools", "grpcurl")
	}
	if _, err := os.Stat(gc); err != nil {
		// In CI grpcurl is installed by hack/install-deps.sh test: its
		// absence is a broken setup, not a reason to skip.
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and grpcurl is missing (hack/install-deps.sh test builds bin/tools/grpcurl; or set GRPCURL): %v", err)
		}
		t.Skipf("needs grpcurl (hack/install-deps.sh test builds bin/tools/grpcurl; or set GRPCURL): %v", err)
	}
	e := newEnv(t)
	call := func(method, data string) (string, error) {
		args := []string{"-plaintext", "-import-path", filepath.Join(repo, "openshell", "proto"), "-import-path", "/usr/include",
			"-proto", "compute_driver.proto"}
		if data != "" {
			args = append(args, "-d", data)
		}
		args = append(args, "unix://"+e.sock, "openshell.compute.v1.ComputeDriver/"+method)
		out, err := exec.Command(gc, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := call("GetCapabilities", ""); err != nil || !strings.Contains(out, `"driverName": "skillrun"`) {
		t.Fatalf("GetCapabilities: %v\n%s", err, out)
	}
	if out, err := call("ValidateSandboxCreate", `{"sandbox":{"id":"../x","name":"n"}}`); err == nil || !strings.Contains(out, "InvalidArgument") || !strings.Contains(out, "sandbox.id") {
		t.Fatalf("ValidateSandboxCreate of a bad id: %v\n%s", err, out)
	}
	if out, err := call("CreateSandbox", `{"sandbox":{"id":"g1","name":"g1","spec":{"template":{"image":"busybox:test"}}}}`); err != nil {
		t.Fatalf("CreateSandbox: %v\n%s", err, out)
	}
	e.waitReady("g1", "BackendReady")
	if out, err := call("GetSandbox", `{"sandbox_id":"g1"}`); err != nil || !strings.Contains(out, `"reason": "BackendReady"`) {
		t.Fatalf("GetSandbox: %v\n%s", err, out)
	}
	if out, err := call("DeleteSandbox", `{"sandbox_id":"g1"}`); err != nil || !strings.Contains(out, `"deleted": true`) {
		t.Fatalf("DeleteSandbox: %v\n%s", err, out)
	}
	if out, err := call("GetSandbox", `{"sandbox_id":"g1"}`); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("GetSandbox after delete: %v\n%s", err, out)
	}
}

// TestOpenShellDriverRefuses: bad command lines fail at once with one
// clear line, exit 2 (a usage error) but for a socket that cannot be
// made, and leave no socket or state behind.
func TestOpenShellDriverRefuses(t *testing.T) {
	if binaryErr != nil {
		t.Skipf("skillrun binary: %v", binaryErr)
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o700)
	os.Symlink(real, filepath.Join(dir, "link"))
	state := filepath.Join(dir, "state")
	sv := filepath.Join(dir, "sv")
	os.WriteFile(sv, []byte("#!/bin/sh\n"), 0o755)
	p := newPKI(t, filepath.Join(dir, "tls"))
	sock := filepath.Join(real, "s.sock")
	good := []string{"--socket", sock, "--state", state, "--supervisor-bin", sv, "--endpoint", "https://host.openshell.internal:8080", "--tls-dir", p.dir}
	with := func(args ...string) []string { return append(append([]string{}, good...), args...) }
	without := func(flag string) []string {
		var out []string
		for i := 0; i < len(good); i += 2 {
			if good[i] != flag {
				out = append(out, good[i], good[i+1])
			}
		}
		return out
	}
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"no socket":              {without("--socket"), 2, "openshell-driver: --socket is required"},
		"no supervisor bin":      {without("--supervisor-bin"), 2, "openshell-driver: --supervisor-bin is required"},
		"no endpoint":            {without("--endpoint"), 2, "openshell-driver: --endpoint is required"},
		"missing supervisor bin": {with("--supervisor-bin", filepath.Join(dir, "nosuch")), 2, "supervisor binary: stat " + filepath.Join(dir, "nosuch")},
		"https without TLS":      {without("--tls-dir"), 2, "TLS: the CA, the client certificate and its key are all needed"},
		"TLS dir and file":       {with("--tls-ca", filepath.Join(p.dir, "ca.crt")), 2, "--tls-dir or --tls-ca, --tls-cert, --tls-key, not both"},
		"plaintext endpoint":     {append(without("--tls-dir"), "--endpoint", "http://host.openshell.internal:8080"), 2, "the egress allowlist cannot pass plaintext gRPC"},
		"bad gateway address":    {with("--gateway-address", "gw.example"), 2, `gw.example`},
		"symlinked socket dir":   {with("--socket", filepath.Join(dir, "link", "s.sock")), 1, "not a symlink"},
		"extra argument":         {with("extra"), 1, "argument"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, binary, append([]string{"--root", filepath.Join(dir, "root"), "openshell-driver"}, c.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("exit: %v (timeout: %v)", err, ctx.Err())
			}
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Errorf("exit code %d, want %d", code, c.code)
			}
			if !strings.Contains(stderr.String(), c.want) || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
				t.Errorf("stderr %q: want one line saying %q", stderr.String(), c.want)
			}
			if _, err := os.Lstat(state); err == nil {
				t.Error("state directory created")
			}
			if ents, _ := os.ReadDir(real); len(ents) != 0 {
				t.Errorf("left in the socket directory: %v", ents)
			}
		})
	}
}

// TestOpenShellDriverQuantities: Kubernetes' forms of quantities reach the
// container's cgroups, and the smallest limits Validate accepts are ones
// the runtime applies (Create succeeds: runc sets the cgroup limits before
// it answers).
func TestOpenShellDriverQuantities(t *testing.T) {
	e := newEnv(t)
	sb := sandbox("k8s")
	sb.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: "+1", MemoryLimit: "129e6"}
	if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sb}); err != nil {
		t.Fatalf("create with +1 CPU and 129e6 bytes: %v\n%s", err, e.log)
	}
	e.waitReady("k8s", "BackendReady")
	checkCPUQuota(t, e, "k8s", "100000")
	checkMemoryLimit(t, e, "k8s", int64(129e6)/4096*4096) // the kernel keeps whole pages
	sb = sandbox("min")
	sb.Spec.Template.Resources = &pb.DriverResourceRequirements{CpuLimit: "10m", MemoryLimit: "6Mi"}
	if _, err := e.c.ValidateSandboxCreate(ctx(t), &pb.ValidateSandboxCreateRequest{Sandbox: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sb}); err != nil {
		t.Fatalf("create with the smallest limits (10m, 6Mi): %v\n%s", err, e.log)
	}
	// What Validate accepts runs: the smallest limits are enforced and the
	// supervisor comes up within them.
	e.waitReady("min", "BackendReady")
	checkCPUQuota(t, e, "min", "1000")
	checkMemoryLimit(t, e, "min", 6<<20)
}
