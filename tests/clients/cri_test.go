//go:build integration

package clients_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// buildCrirun builds hack/clients/crirun, a minimal CRI client (its own Go
// module, so the main module does not depend on gRPC).
func buildCrirun(t *testing.T, dir string) string {
	t.Helper()
	requireBinary(t, "go")
	src, err := filepath.Abs("../../hack/clients/crirun")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "crirun")
	r := runCmd(context.Background(), cmdSpec{env: os.Environ(), dir: src, timeout: 4 * time.Minute}, "go", "build", "-o", out, ".")
	if r.code != 0 {
		if regexp.MustCompile(`dial tcp|lookup |proxy\.golang|no such host|i/o timeout|connection refused`).MatchString(r.stderr) {
			t.Skipf("SKIP: cannot build the CRI client %s without its modules (no module proxy?):\n%s", src, r)
		}
		t.Fatalf("build the CRI client %s:\n%s", src, r)
	}
	return out
}

// criOutcome is what hack/clients/crirun prints.
type criOutcome struct {
	RuntimeName    string `json:"runtimeName"`
	RuntimeVersion string `json:"runtimeVersion"`
	PodID          string `json:"podId"`
	ContainerID    string `json:"containerId"`
	ExitCode       int32  `json:"exitCode"`
	Log            string `json:"log"`
	Error          string `json:"error"`
}

// TestContainerdCRIRuntimeHandler is the Kubernetes path: a containerd CRI
// runtime entry `runtimes.skillrun` with runtime_type io.containerd.runc.v2 and
// options.BinaryName = the runtime under test, selected by the runtime handler
// name as the kubelet does for a pod whose RuntimeClass has `handler: skillrun`.
// ctr cannot select CRI handlers (it sends its own runc options), so a small
// CRI client stands in for the kubelet.
func TestContainerdCRIRuntimeHandler(t *testing.T) {
	requireRoot(t)
	requireBinary(t, "containerd")
	bin := buildCrirun(t, tempDir(t, "crib"))
	const ref = "docker.io/library/skillrun-busybox:test"
	cg := "skr" + randomSuffix()
	c := startContainerd(t, daemonOptions{cri: true, extra: func(c *containerd) string {
		c.ns = "k8s.io" // the CRI plugin's namespace
		// A private runtime root (options.Root), so the test never touches
		// /run/containerd/runc/k8s.io of anyone else.
		c.root = filepath.Join(c.dir, "runc-root", "k8s.io")
		c.cgroupRoot = cg
		return fmt.Sprintf(`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[1]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[2]q
    conf_dir = %[3]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.skillrun]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.skillrun.options]
        BinaryName = %[4]q
        Root = %[5]q
`, ref, filepath.Join(c.dir, "cni", "bin"), filepath.Join(c.dir, "cni", "conf"), c.runtime, filepath.Join(c.dir, "runc-root"))
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The pod's sandbox ("pause") image and the container image: one local image.
	archive := filepath.Join(c.dir, "image.tar")
	ociImageArchive(t, c.rootfs, ref, archive, []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"})
	c.ctr(ctx, 0, "images", "import", archive)

	t.Run("ctr-image", func(t *testing.T) {
		c := *c
		c.t = t
		// The same image through ctr (image path instead of --rootfs).
		id := "img-" + randomSuffix()
		r := c.ctr(ctx, 0, "run", "--rm", "--runc-binary", c.runtime, "--runc-root", filepath.Dir(c.root),
			"--cgroup", "/"+cg+"/"+id, "--fifo-dir", c.fifoDir, ref, id, "sh", "-c", "echo from-image $PATH")
		if r.stdout != "from-image /bin\n" {
			t.Errorf("stdout = %q, want %q (image config Env applied?)\n%s", r.stdout, "from-image /bin\n", r)
		}
		c.assertGone(ctx, id, 0)
	})

	t.Run("runtime-handler", func(t *testing.T) {
		c := *c
		c.t = t
		before, _ := os.ReadFile(c.argvLog)
		logDir := filepath.Join(c.dir, "podlogs")
		r := runCmd(ctx, cmdSpec{env: os.Environ(), timeout: 100 * time.Second}, bin, "-endpoint", c.sock, "-handler", "skillrun",
			"-image", ref, "-logdir", logDir, "-cgroup-parent", "/"+cg, "-timeout", "90s",
			"--", "sh", "-c", "echo hello-from-cri; exit 3")
		var o criOutcome
		if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || r.code != 0 {
			t.Fatalf("CRI run through handler skillrun failed (json err %v)\n%s\n%s", err, r, c.diag())
		}
		if o.ExitCode != 3 {
			t.Errorf("container exit code %d, want 3\n%s", o.ExitCode, r)
		}
		if !strings.Contains(o.Log, "stdout F hello-from-cri") {
			t.Errorf("CRI log lacks the container's output %q:\n%s", "stdout F hello-from-cri", o.Log)
		}
		after, _ := os.ReadFile(c.argvLog)
		calls := string(after[len(before):])
		// The shim must have used options.BinaryName (our wrapper) and options.Root
		// for both the sandbox and the container.
		for _, id := range []string{o.PodID, o.ContainerID} {
			want := regexp.MustCompile(`(?m)^--root ` + regexp.QuoteMeta(c.root) + ` --log \S+ --log-format json create --bundle \S+ --pid-file \S+ ` + id + `$`)
			if !want.MatchString(calls) {
				t.Errorf("no create of %s through the skillrun handler's BinaryName; calls:\n%s", id, calls)
			}
		}
		for _, id := range []string{o.ContainerID, o.PodID} {
			c.assertGone(ctx, id, 0)
		}
	})
}
