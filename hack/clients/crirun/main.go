// Command crirun drives containerd's CRI plugin the way the kubelet does for a
// pod with `runtimeClassName: <handler>`: RunPodSandbox with the runtime
// handler, CreateContainer, StartContainer, wait for exit, read the CRI log,
// then stop and remove the pod. It prints one JSON object with the outcome.
// It exists so tests/clients can prove a containerd CRI runtime entry
// (runtime_type io.containerd.runc.v2 + options.BinaryName) works without a
// kubelet or crictl; it is its own module so the main module needs no gRPC.
//
//	crirun -endpoint /path/containerd.sock -handler skillrun -image NAME -logdir DIR -- sh -c 'echo hi'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type outcome struct {
	RuntimeName    string `json:"runtimeName"`
	RuntimeVersion string `json:"runtimeVersion"`
	PodID          string `json:"podId"`
	ContainerID    string `json:"containerId"`
	ExitCode       int32  `json:"exitCode"`
	Log            string `json:"log"`
	Error          string `json:"error,omitempty"`
}

func main() {
	endpoint := flag.String("endpoint", "", "containerd socket path")
	handler := flag.String("handler", "", "runtime handler (the RuntimeClass handler)")
	image := flag.String("image", "", "image reference, already in the k8s.io namespace")
	logDir := flag.String("logdir", "", "pod log directory")
	cgroupParent := flag.String("cgroup-parent", "", "pod cgroup parent")
	timeout := flag.Duration("timeout", 90*time.Second, "overall timeout")
	flag.Parse()
	out := outcome{ExitCode: -1}
	err := run(&out, *endpoint, *handler, *image, *logDir, *cgroupParent, *timeout, flag.Args())
	if err != nil {
		out.Error = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if err != nil {
		os.Exit(1)
	}
}

func run(out *outcome, endpoint, handler, image, logDir, cgroupParent string, timeout time.Duration, cmd []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, "unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithBlock())
	if err != nil {
		return fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)

	v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	out.RuntimeName, out.RuntimeVersion = v.RuntimeName, v.RuntimeVersion

	podCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "crirun", Uid: fmt.Sprintf("uid-%d", time.Now().UnixNano()), Namespace: "default"},
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				// Host network: no CNI needed.
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	pod, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: podCfg, RuntimeHandler: handler})
	if err != nil {
		return fmt.Errorf("RunPodSandbox(handler %q): %w", handler, err)
	}
	out.PodID = pod.PodSandboxId
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		_, _ = rs.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: out.PodID})
		_, _ = rs.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: out.PodID})
	}()

	ctrCfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  cmd,
		LogPath:  "main.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
	c, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: out.PodID, Config: ctrCfg, SandboxConfig: podCfg})
	if err != nil {
		return fmt.Errorf("CreateContainer: %w", err)
	}
	out.ContainerID = c.ContainerId
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return fmt.Errorf("StartContainer: %w", err)
	}
	for {
		st, err := rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
		if err != nil {
			return fmt.Errorf("ContainerStatus: %w", err)
		}
		if st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			out.ExitCode = st.Status.ExitCode
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container still %s: %w", st.Status.State, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	b, err := os.ReadFile(filepath.Join(logDir, "main.log"))
	if err != nil {
		return err
	}
	out.Log = string(b)
	if _, err := rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return fmt.Errorf("RemoveContainer: %w", err)
	}
	return nil
}
