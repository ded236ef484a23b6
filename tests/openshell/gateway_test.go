//go:build integration

package openshell_test

// A stand-in for OpenShell's gateway: gRPC over TLS with a client CA on a
// host address, serving the project's compute driver service (the real
// gateway's own service is not among the project's protos), whose
// WatchSandboxes stream stands for the supervisor's ConnectSupervisor. It
// records, per stream, the bearer token, the client certificate and the
// server name the client sent, and counts the connections it accepted.
// A second listener, on every address of the host, records every
// connection: a sandbox must reach none.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// pki is a test CA, the gateway's server certificate (for
// host.openshell.internal) and a client certificate it signed, written
// as `openshell-gateway generate-certs` lays them out.
type pki struct {
	dir    string // ca.crt, client/tls.crt, client/tls.key
	server tls.Certificate
	pool   *x509.CertPool
}

func newPKI(t *testing.T, dir string) *pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "openshell-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, cn string, dns []string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	p := &pki{dir: dir, pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	srvDER, srvKey := issue(2, "openshell-server", []string{"host.openshell.internal", "localhost"}, x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}
	cliDER, cliKey := issue(3, "openshell-client", nil, x509.ExtKeyUsageClientAuth)
	cliKeyDER, err := x509.MarshalPKCS8PrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "client"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*pem.Block{
		"ca.crt":         {Type: "CERTIFICATE", Bytes: caDER},
		"client/tls.crt": {Type: "CERTIFICATE", Bytes: cliDER},
		"client/tls.key": {Type: "PRIVATE KEY", Bytes: cliKeyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// stream is one WatchSandboxes stream the stand-in gateway served.
type stream struct {
	auth, clientCN, serverName string
	verified                   bool
	open                       bool
}

type gatewayStandIn struct {
	pb.UnimplementedComputeDriverServer
	port  int
	mu    sync.Mutex
	conns int
	seen  []*stream
}

type countingListener struct {
	net.Listener
	count func()
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.count()
	}
	return c, err
}

// startGateway serves the stand-in gateway on 127.0.0.1 (the address the
// driver maps host.openshell.internal to by default: the gateway's
// loopback listener).
func startGateway(t *testing.T, p *pki) *gatewayStandIn {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gatewayStandIn{port: l.Addr().(*net.TCPAddr).Port}
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert})
	srv := grpc.NewServer(grpc.Creds(creds))
	pb.RegisterComputeDriverServer(srv, g)
	go srv.Serve(countingListener{l, func() { g.mu.Lock(); g.conns++; g.mu.Unlock() }})
	t.Cleanup(srv.Stop)
	return g
}

func (g *gatewayStandIn) WatchSandboxes(_ *pb.WatchSandboxesRequest, ss pb.ComputeDriver_WatchSandboxesServer) error {
	s := &stream{open: true}
	if md, ok := metadata.FromIncomingContext(ss.Context()); ok {
		s.auth = strings.Join(md.Get("authorization"), ",")
	}
	if p, ok := peer.FromContext(ss.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			s.serverName = ti.State.ServerName
			s.verified = len(ti.State.VerifiedChains) > 0
			if len(ti.State.PeerCertificates) > 0 {
				s.clientCN = ti.State.PeerCertificates[0].Subject.CommonName
			}
		}
	}
	g.mu.Lock()
	g.seen = append(g.seen, s)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); s.open = false; g.mu.Unlock() }()
	if err := ss.Send(&pb.WatchSandboxesEvent{Payload: &pb.WatchSandboxesEvent_Deleted{Deleted: &pb.WatchSandboxesDeletedEvent{SandboxId: "hello from the gateway"}}}); err != nil {
		return err
	}
	<-ss.Context().Done()
	return nil
}

// streams returns a copy of the streams served with token's bearer.
func (g *gatewayStandIn) streams(token string) (all int, open int, mine []stream) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.seen {
		if s.auth == "Bearer "+token {
			mine = append(mine, *s)
			if s.open {
				open++
			}
		}
	}
	return len(g.seen), open, mine
}

// waitOpen waits until n streams with token's bearer are open at once.
func (g *gatewayStandIn) waitOpen(t *testing.T, token string, n int) []stream {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, open, mine := g.streams(token)
		if open == n {
			return mine
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway: %d open streams with the token %q, want %d (seen %+v)", open, token, n, mine)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// trap is a listener on every address of the host that records every
// connection.
type trap struct {
	port  int
	mu    sync.Mutex
	conns []string
}

func startTrap(t *testing.T) *trap {
	t.Helper()
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{port: l.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tr.mu.Lock()
			tr.conns = append(tr.conns, c.RemoteAddr().String())
			tr.mu.Unlock()
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return tr
}

func (tr *trap) seen() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.conns...)
}

// hostIPv4 is an address of this host other than loopback.
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("the host has no IPv4 address but loopback")
	return ""
}

// waitRecord waits for the supervisor's record in sandbox id's workspace
// (written whole once its gateway stream is open, or has failed).
func (e *env) waitRecord(id string) supervisorRecord {
	e.t.Helper()
	path := filepath.Join(e.state, "sandboxes", id, "workspace", "supervisor.json")
	deadline := time.Now().Add(40 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return e.supervisorRecord(id)
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(e.state, "sandboxes", id, "console.log"))
			e.t.Fatalf("sandbox %s: no supervisor record\nconsole:\n%s\ndriver:\n%s", id, out, e.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOpenShellDriverGateway: a sandbox's supervisor reaches its gateway,
// by name, over TLS, through skillrun's egress allowlist, and nothing
// else; OpenShell's own network setup works in its network namespace; the
// gateway's stop and start sweeps, and a host reboot (the containers gone
// with the runtime root) followed by the start sweep, bring it back to its
// gateway. Verdicts from the host: what the stand-in gateway and the trap
// listener saw, the container's network namespace, the driver's answers.
func TestOpenShellDriverGateway(t *testing.T) {
	e := newEnv(t)
	host := hostIPv4(t)
	probes := []string{
		fmt.Sprintf("host.openshell.internal:%d", e.trap.port),
		fmt.Sprintf("127.0.0.1:%d", e.trap.port),
		fmt.Sprintf("%s:%d", host, e.trap.port),
		fmt.Sprintf("127.0.0.1:%d", e.gw.port),
		fmt.Sprintf("%s:%d", host, e.gw.port),
		fmt.Sprintf("198.18.0.1:%d", e.gw.port),
	}
	ids := []string{"gw1", "gw2"}
	for _, id := range ids {
		sb := sandbox(id)
		sb.Spec.Template.Environment["SUPERVISOR_PROBES"] = strings.Join(probes, ",")
		if _, err := e.c.ValidateSandboxCreate(ctx(t), &pb.ValidateSandboxCreateRequest{Sandbox: sb}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.CreateSandbox(ctx(t), &pb.CreateSandboxRequest{Sandbox: sb}); err != nil {
			t.Fatalf("create %s: %v\n%s", id, err, e.log)
		}
	}
	rec := e.waitRecord("gw1")
	if rec.Stream != "open: hello from the gateway" {
		t.Fatalf("the supervisor's stream to the gateway: %q %q", rec.Stream, rec.StreamErr)
	}
	// In the sandbox: both names resolve (to the egress server's
	// synthetic addresses), nothing else does; the /etc files are the
	// driver's; the TLS files are there, read-only.
	if a := rec.Resolved["host.openshell.internal"]; !strings.HasPrefix(a, "198.18.") {
		t.Errorf("host.openshell.internal resolves to %q in the sandbox", a)
	}
	if a := rec.Resolved["example.com"]; !strings.HasPrefix(a, "error") {
		t.Errorf("example.com resolves to %q in the sandbox, want an error", a)
	}
	if rec.Resolv != "nameserver 127.0.0.1\noptions attempts:2 timeout:2\n" || !strings.HasPrefix(rec.Hosts, "127.0.0.1\tlocalhost\n") {
		t.Errorf("/etc/resolv.conf %q, /etc/hosts %q", rec.Resolv, rec.Hosts)
	}
	if rec.TLSFiles["ca_err"] != "<nil>" || rec.TLSFiles["pair_err"] != "<nil>" || !strings.Contains(rec.TLSFiles["key_write_err"], "read-only file system") {
		t.Errorf("TLS files in the sandbox: %v", rec.TLSFiles)
	}
	// Everything else it tried failed: other ports of the gateway's name,
	// the host's addresses, the gateway's own address, and the gateway's
	// endpoint with a foreign server name.
	for target, got := range rec.Probes {
		if got == "handshake completed" {
			t.Errorf("the sandbox completed a TLS handshake with %s", target)
		}
	}
	if len(rec.Probes) != len(probes)+1 {
		t.Errorf("probes %v", rec.Probes)
	}
	t.Logf("what the sandbox could not reach: %v", rec.Probes)
	checkSupervisorNetwork(t, rec)
	t.Logf("the supervisor's network setup: %v", rec.Network)

	// From the host: the gateway's streams carry each sandbox's token and
	// the client certificate, verified, and the server name
	// host.openshell.internal; every connection it accepted was one of
	// them; the trap saw nothing.
	checkStreams := func(when string, want int) {
		t.Helper()
		for _, id := range ids {
			for _, s := range e.gw.waitOpen(t, "token-of-"+id, 1) {
				if s.clientCN != "openshell-client" || !s.verified || s.serverName != "host.openshell.internal" {
					t.Errorf("%s: %s's stream %+v", when, id, s)
				}
			}
		}
		all, _, _ := e.gw.streams("")
		e.gw.mu.Lock()
		conns := e.gw.conns
		e.gw.mu.Unlock()
		if all != want || conns != want {
			t.Errorf("%s: the gateway accepted %d connections and served %d streams, want %d", when, conns, all, want)
		}
		if got := e.trap.seen(); len(got) != 0 {
			t.Errorf("%s: the trap listener on the host was reached from %v", when, got)
		}
	}
	checkStreams("after create", 2)
	// The sandbox has a network namespace of its own.
	hostNet, _ := os.Readlink("/proc/self/ns/net")
	if sbNet, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", e.containerPid("gw1"))); err != nil || sbNet == hostNet {
		t.Errorf("the sandbox's network namespace %q (%v) is the host's %q", sbNet, err, hostNet)
	}
	if err := os.WriteFile(filepath.Join(e.state, "sandboxes", "gw1", "workspace", "kept"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The gateway's shutdown sweep (StopSandbox of every running
	// sandbox, concurrently), then its startup sweep (StartSandbox).
	sweep := func(stop bool) {
		t.Helper()
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if stop {
					_, err = e.c.StopSandbox(ctx(t), &pb.StopSandboxRequest{SandboxId: id, SandboxName: "name-" + id})
				} else {
					_, err = e.c.StartSandbox(ctx(t), &pb.StartSandboxRequest{SandboxId: id, SandboxName: "name-" + id})
				}
				if err != nil {
					t.Errorf("sweep (stop %v) of %s: %v\n%s", stop, id, err, e.log)
				}
			}()
		}
		wg.Wait()
	}
	sweep(true)
	for _, id := range ids {
		e.waitReady(id, "ContainerExited")
		if _, open, _ := e.gw.streams("token-of-" + id); open != 0 {
			t.Errorf("%s's stream is still open after the stop sweep", id)
		}
		os.Remove(filepath.Join(e.state, "sandboxes", id, "workspace", "supervisor.json"))
	}
	sweep(false)
	for _, id := range ids {
		e.waitReady(id, "BackendReady")
		e.waitRecord(id)
	}
	checkStreams("after the stop and start sweeps", 4)

	// A host reboot: the driver and every container die, the runtime
	// root (tmpfs) is gone. The restarted driver reports the sandboxes
	// as exited; the gateway's start sweep brings them back from their
	// retained bundles, to the gateway.
	e.stopDriver(syscall.SIGKILL)
	for _, id := range ids {
		if out, err := exec.Command(binary, "--root", e.root, "delete", "-f", "openshell-"+id).CombinedOutput(); err != nil {
			t.Fatalf("delete openshell-%s out of band: %v %s", id, err, out)
		}
		os.Remove(filepath.Join(e.state, "sandboxes", id, "workspace", "supervisor.json"))
	}
	if err := os.RemoveAll(e.root); err != nil {
		t.Fatal(err)
	}
	e.startDriver()
	for _, id := range ids {
		sb := e.waitReady(id, "ContainerExited")
		if m := sb.GetStatus().GetConditions()[0].GetMessage(); m != "Container does not exist" {
			t.Errorf("%s after the reboot: %q", id, m)
		}
	}
	sweep(false)
	for _, id := range ids {
		e.waitReady(id, "BackendReady")
		rec := e.waitRecord(id)
		if rec.Stream != "open: hello from the gateway" || rec.Token != "token-of-"+id {
			t.Errorf("%s after the reboot: stream %q %q, token %q (network %v)", id, rec.Stream, rec.StreamErr, rec.Token, rec.Network)
		}
		// The supervisor's network setup works again in a restarted
		// sandbox, whose rootfs kept the previous run's files.
		checkSupervisorNetwork(t, rec)
	}
	checkStreams("after the reboot and the start sweep", 6)
	if out, err := e.exec("gw1", "cat", "/sandbox/kept"); err != nil || out != "kept\n" {
		t.Errorf("the workspace after the reboot: %q %v", out, err)
	}
	for _, id := range ids {
		if d, err := e.c.DeleteSandbox(ctx(t), &pb.DeleteSandboxRequest{SandboxId: id}); err != nil || !d.GetDeleted() {
			t.Fatalf("delete %s: %v %v", id, d, err)
		}
	}
	if got := e.trap.seen(); len(got) != 0 {
		t.Errorf("the trap listener on the host was reached from %v", got)
	}
	if strings.Contains(e.log.String(), "unpack layer") {
		t.Errorf("umoci's progress lines reach the driver's log at info level:\n%s", e.log)
	}
}
