package openshell

// Shared fixtures of the driver's unit tests: a tiny OCI image layout, a
// base spec, a Driver over runtime/fake, an in-process gRPC client over
// bufconn, and runtime wrappers that fail or ignore SIGTERM.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "github.com/skillrun/skillrun/openshell/computev1"
	"github.com/skillrun/skillrun/runtime"
	"github.com/skillrun/skillrun/runtime/fake"
)

// The images of the test layout.
const (
	testImage      = "busybox:test" // one layer (etc/hello, work/), WorkingDir /work
	brokenImage    = "broken:1"     // its layer blob is missing: unpacking fails
	otherArchImage = "otherarch:1"  // only a manifest for another architecture
)

// testLayout writes an OCI image layout holding testImage, brokenImage and
// otherArchImage into a new temporary directory and returns it.
func testLayout(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Platform    map[string]string `json:"platform,omitempty"`
	}
	put := func(mediaType string, data []byte) desc {
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", h), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return desc{MediaType: mediaType, Digest: "sha256:" + h, Size: len(data)}
	}
	putJSON := func(mediaType string, v any) desc {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return put(mediaType, data)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, h := range []tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/hello", Typeflag: tar.TypeReg, Mode: 0o644, Size: 6},
		{Name: "work/", Typeflag: tar.TypeDir, Mode: 0o755},
	} {
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("hello\n"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ld := put("application/vnd.oci.image.layer.v1.tar", layer.Bytes())
	cd := putJSON("application/vnd.oci.image.config.v1+json", map[string]any{
		"architecture": goruntime.GOARCH, "os": "linux",
		"config": map[string]any{"Env": []string{"IMAGE_VAR=from-image", "PATH=/bin"}, "WorkingDir": "/work"},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{ld.Digest}},
	})
	manifest := func(layers ...desc) desc {
		return putJSON("application/vnd.oci.image.manifest.v1+json", map[string]any{
			"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
			"config": cd, "layers": layers,
		})
	}
	ref := func(d desc, name string) desc {
		d.Annotations = map[string]string{"org.opencontainers.image.ref.name": name}
		return d
	}
	good := ref(manifest(ld), testImage)
	missing := ld
	missing.Digest = "sha256:" + strings.Repeat("0", 64)
	broken := ref(manifest(missing), brokenImage)
	other := ref(manifest(ld), otherArchImage)
	arch := "s390x"
	if goruntime.GOARCH == arch {
		arch = "amd64"
	}
	other.Platform = map[string]string{"os": "linux", "architecture": arch}
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []desc{good, broken, other},
	})
	if err := os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// baseSpec is a small stand-in for the runtime's `spec` default.
func baseSpec() *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.Process{
			Args:    []string{"sh"},
			Cwd:     "/",
			Env:     []string{"PATH=/bin"},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.MountNamespace},
		}},
	}
}

// testEndpoint is the gateway endpoint of testConfig.
const testEndpoint = "https://gateway.test:8443"

// testConfig is a Config over rt with a fresh state directory, the test
// image layout, a supervisor file and TLS files for testEndpoint. The poll
// interval is long: tests that want polling set a short one.
func testConfig(t *testing.T, rt runtime.Runtime) Config {
	t.Helper()
	sv := filepath.Join(t.TempDir(), "supervisor")
	if err := os.WriteFile(sv, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Config{
		Runtime:       rt,
		StateDir:      filepath.Join(t.TempDir(), "state"),
		ImagesDir:     testLayout(t),
		SupervisorBin: sv,
		Endpoint:      testEndpoint,
		TLS:           testTLS(t),
		DefaultImage:  testImage,
		BaseSpec:      baseSpec,
		Version:       "v-test",
		PollInterval:  time.Hour,
		StopTimeout:   time.Second,
	}
}

// testTLS writes a CA and a client certificate and key it signed into a
// new temporary directory, laid out as openshell-gateway generate-certs
// writes them (ca.crt, client/tls.crt, client/tls.key).
func testTLS(t *testing.T) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "openshell-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := TLSDir(dir)
	os.Mkdir(filepath.Join(dir, "client"), 0o700)
	for path, block := range map[string]*pem.Block{
		f.CA: {Type: "CERTIFICATE", Bytes: caDER}, f.Cert: {Type: "CERTIFICATE", Bytes: der}, f.Key: {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return TLSDir(dir)
}

// newDriver is New(cfg) that must succeed without warnings.
func newDriver(t *testing.T, cfg Config) *Driver {
	t.Helper()
	d, warnings, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Fatalf("warnings from New: %q", warnings)
	}
	return d
}

// serve serves d over an in-process gRPC connection and returns a client.
func serve(t *testing.T, d *Driver) pb.ComputeDriverClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pb.RegisterComputeDriverServer(srv, d)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewComputeDriverClient(conn)
}

// testCtx ends with the test, and after 30s at the latest.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newSandbox is a valid create request's sandbox.
func newSandbox(id string) *pb.DriverSandbox {
	return &pb.DriverSandbox{
		Id: id, Name: "name-" + id, Namespace: "ns", Workspace: "ws",
		Spec: &pb.DriverSandboxSpec{
			SandboxToken: "token-" + id,
			Environment:  map[string]string{"SPEC_VAR": "spec"},
			Template:     &pb.DriverSandboxTemplate{Image: testImage},
		},
	}
}

// wantCode fails unless err is a status error with code and, when msg is
// not empty, exactly that message.
func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code || (msg != "" && st.Message() != msg) {
		t.Fatalf("error %v, want %v %q", err, code, msg)
	}
}

// condition is a sandbox's Ready condition as "Status/Reason/Message".
func condition(sb *pb.DriverSandbox) string {
	c := sb.GetStatus().GetConditions()
	if len(c) != 1 || c[0].GetType() != "Ready" {
		return "unexpected conditions " + sb.GetStatus().String()
	}
	return c[0].GetStatus() + "/" + c[0].GetReason() + "/" + c[0].GetMessage()
}

// The conditions the driver reports.
const (
	condReady       = "True/BackendReady/Container is running"
	condProvisioned = "False/Starting/Sandbox is being provisioned"
	condStopped     = "False/ContainerExited/Sandbox is stopped"
	condExited      = "False/ContainerExited/Container exited"
	condMissing     = "False/ContainerExited/Container does not exist"
	condPaused      = "False/ContainerPaused/Container is paused"
	condDeleting    = "False/Deleting/Sandbox is being deleted"
	condCreated     = "False/Starting/Container created"
)

// hookedRuntime is a fake runtime whose Run and List can fail and whose
// Kill can ignore SIGTERM (a container that does not stop).
type hookedRuntime struct {
	*fake.Runtime
	mu            sync.Mutex
	runErr        error
	listErr       error
	deleteErr     error
	ignoreSIGTERM bool
}

func (r *hookedRuntime) set(f func(r *hookedRuntime)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *hookedRuntime) Run(ctx context.Context, id string, o runtime.RunOpts) (int, error) {
	r.mu.Lock()
	err := r.runErr
	r.mu.Unlock()
	if err != nil {
		return -1, err
	}
	return r.Runtime.Run(ctx, id, o)
}

func (r *hookedRuntime) List(ctx context.Context) ([]runtime.State, []error, error) {
	r.mu.Lock()
	err := r.listErr
	r.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return r.Runtime.List(ctx)
}

func (r *hookedRuntime) Delete(ctx context.Context, id string, force bool) error {
	r.mu.Lock()
	err := r.deleteErr
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.Runtime.Delete(ctx, id, force)
}

func (r *hookedRuntime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	r.mu.Lock()
	ignore := r.ignoreSIGTERM && sig == syscall.SIGTERM
	r.mu.Unlock()
	if ignore {
		return nil
	}
	return r.Runtime.Kill(ctx, id, sig, all)
}

var errBoom = errors.New("boom")

func goarch() string { return goruntime.GOARCH }
