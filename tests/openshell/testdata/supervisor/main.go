// Command supervisor stands in for OpenShell's sandbox supervisor in the
// openshell driver tests. It records in <workdir>/supervisor.json what it
// was given (arguments, environment, the token and TLS files, its /etc
// files, whether its own binary and the TLS key can be changed), what the
// real supervisor's setup needs of its container (dropping to another
// user, namespaces and mounts, chown; keyctl, which Docker's seccomp
// profile denies) and what its network setup needs: a named network
// namespace as `ip netns add` makes one, a veth pair into it with the
// addresses and route OpenShell uses (10.200.0.1/24, 10.200.0.2/24), its
// proxy listening on 10.200.0.1:3128, nftables in the inner namespace (a
// table, a NAT chain and a redirect rule, as its transparent TCP mode),
// and connections from the inner namespace through both.
//
// Then it does what the real supervisor does with its gateway: it resolves
// host.openshell.internal and the endpoint's host name, dials
// OPENSHELL_ENDPOINT over TLS with the CA, certificate and key of
// OPENSHELL_TLS_CA/_CERT/_KEY (server name: the endpoint's host, or
// OPENSHELL_GATEWAY_TLS_SERVER_NAME), sends the token of
// OPENSHELL_SANDBOX_TOKEN_FILE as "authorization: Bearer", and holds a
// stream open (the stand-in gateway serves the project's compute driver
// service; WatchSandboxes is the stream). Before that it tries every
// host:port of SUPERVISOR_PROBES with a TLS handshake (each must fail: the
// sandbox reaches its gateway and nothing else) and the endpoint with a
// foreign server name. It waits for SIGTERM, keeping the stream open.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	pb "github.com/skillrun/skillrun/openshell/computev1"
)

func main() {
	workdir := ""
	if len(os.Args) == 3 && os.Args[1] == "--workdir" {
		workdir = os.Args[2]
	}
	rec := map[string]any{"args": os.Args, "env": os.Environ(), "pid": os.Getpid()}
	token := ""
	if tf := os.Getenv("OPENSHELL_SANDBOX_TOKEN_FILE"); tf != "" {
		if fi, err := os.Stat(tf); err == nil {
			rec["token_mode"] = fmt.Sprintf("%o", fi.Mode().Perm())
		}
		data, err := os.ReadFile(tf)
		token = string(data)
		rec["token"], rec["token_err"] = token, fmt.Sprint(err)
	}
	rec["self_write_err"] = fmt.Sprint(os.Chmod(os.Args[0], 0o777))
	for _, f := range []string{"/etc/hosts", "/etc/resolv.conf"} {
		data, err := os.ReadFile(f)
		rec[f] = string(data)
		if err != nil {
			rec[f] = "error: " + err.Error()
		}
	}
	// drop_privileges(): setgid/setuid to the sandbox user.
	setuid := exec.Command("/bin/busybox", "id", "-u")
	setuid.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := setuid.CombinedOutput()
	rec["setuid_out"], rec["setuid_err"] = strings.TrimSpace(string(out)), fmt.Sprint(err)
	// The agent's namespaces: new mount and network namespaces, a mount.
	ns := exec.Command("/bin/busybox", "mount", "-t", "tmpfs", "probe", "/tmp")
	ns.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}
	out, err = ns.CombinedOutput()
	rec["netns_mount_err"] = fmt.Sprint(err, " ", strings.TrimSpace(string(out)))
	// prepare_filesystem(): chown to the sandbox user.
	probe := filepath.Join(workdir, "chown-probe")
	os.WriteFile(probe, nil, 0o644)
	rec["chown_err"] = fmt.Sprint(os.Chown(probe, 65534, 65534))
	os.Remove(probe)
	_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
	rec["keyctl_err"] = fmt.Sprint(err)

	rec["network"] = networkSetup()

	if ep := os.Getenv("OPENSHELL_ENDPOINT"); strings.HasPrefix(ep, "https://") {
		gatewayProbes(rec, ep, token)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	data, _ := json.Marshal(rec)
	// Written whole, then renamed: a reader never sees half of it.
	tmp := filepath.Join(workdir, ".supervisor.json")
	if err := os.WriteFile(tmp, data, 0o644); err != nil || os.Rename(tmp, filepath.Join(workdir, "supervisor.json")) != nil {
		fmt.Fprintln(os.Stderr, "supervisor:", err)
		os.Exit(1)
	}
	fmt.Println("supervisor: ready")
	<-sigs
	fmt.Println("supervisor: terminating")
}

// gatewayProbes records the sandbox's view of its gateway: name
// resolution, the TLS files, refused connections elsewhere, and the
// stream to the gateway itself, which it keeps open.
func gatewayProbes(rec map[string]any, endpoint, token string) {
	u, err := url.Parse(endpoint)
	if err != nil {
		rec["endpoint_err"] = err.Error()
		return
	}
	resolved := map[string]string{}
	for _, name := range []string{"host.openshell.internal", u.Hostname(), "example.com"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		cancel()
		resolved[name] = strings.Join(addrs, ",")
		if err != nil {
			resolved[name] = "error: " + err.Error()
		}
	}
	rec["resolved"] = resolved
	tlsFiles := map[string]string{}
	var certs []tls.Certificate
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(os.Getenv("OPENSHELL_TLS_CA"))
	tlsFiles["ca_err"] = fmt.Sprint(err)
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(os.Getenv("OPENSHELL_TLS_CERT"), os.Getenv("OPENSHELL_TLS_KEY"))
	tlsFiles["pair_err"] = fmt.Sprint(err)
	if err == nil {
		certs = append(certs, cert)
	}
	f, err := os.OpenFile(os.Getenv("OPENSHELL_TLS_KEY"), os.O_WRONLY, 0)
	if err == nil {
		f.Close()
	}
	tlsFiles["key_write_err"] = fmt.Sprint(err)
	rec["tls_files"] = tlsFiles
	serverName := u.Hostname()
	if n := os.Getenv("OPENSHELL_GATEWAY_TLS_SERVER_NAME"); n != "" {
		serverName = n
	}
	handshake := func(addr, name string) string {
		d := &net.Dialer{Timeout: 3 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, Certificates: certs, ServerName: name, NextProtos: []string{"h2"}})
		if err != nil {
			return err.Error()
		}
		c.Close()
		return "handshake completed"
	}
	probes := map[string]string{}
	for _, target := range strings.Split(os.Getenv("SUPERVISOR_PROBES"), ",") {
		if target != "" {
			probes[target] = handshake(target, serverName)
		}
	}
	probes["foreign server name at the endpoint"] = handshake(u.Host, "evil.example")
	rec["probes"] = probes

	// The stream, held open: retried as the real supervisor retries.
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs, ServerName: serverName})
	conn, err := grpc.NewClient("passthrough:///"+u.Host, grpc.WithTransportCredentials(creds))
	if err != nil {
		rec["stream_err"] = err.Error()
		return
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	deadline := time.Now().Add(15 * time.Second)
	for {
		stream, err := pb.NewComputeDriverClient(conn).WatchSandboxes(ctx, &pb.WatchSandboxesRequest{})
		if err == nil {
			var ev *pb.WatchSandboxesEvent
			if ev, err = stream.Recv(); err == nil {
				rec["stream"] = "open: " + ev.GetDeleted().GetSandboxId()
				go func() {
					// Hold it: read until the gateway or SIGTERM ends it.
					for {
						if _, err := stream.Recv(); err != nil {
							return
						}
					}
				}()
				return
			}
		}
		if time.Now().After(deadline) {
			rec["stream_err"] = err.Error()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// networkSetup does, with Go's netlink libraries, what OpenShell's
// supervisor does with ip(8) and nft(8) in its sandbox's network namespace
// (crates/openshell-supervisor-process/src/netns), and reports each step:
// "ok" or the error.
//
// It runs on a goroutine of its own, locked to its thread and never
// unlocked: the thread enters other network namespaces, and one that a
// failed step left in one must die with the goroutine, not go back to Go's
// pool, where the supervisor's own dials and DNS queries would run in that
// namespace ("network is unreachable", which Go's resolver can report as
// "no such host").
func networkSetup() map[string]string {
	out := make(chan map[string]string)
	go func() {
		goruntime.LockOSThread()
		out <- networkSetupLocked()
	}()
	return <-out
}

func networkSetupLocked() map[string]string {
	r := map[string]string{}
	step := func(name string, err error) bool {
		r[name] = "ok"
		if err != nil {
			r[name] = err.Error()
		}
		return err == nil
	}
	// Only in a network namespace of the sandbox's own (lo alone): never
	// on a host's network.
	if links, err := netlink.LinkList(); err != nil || len(links) != 1 {
		r["skipped"] = fmt.Sprintf("not in a network namespace of its own: %d links, %v", len(links), err)
		return r
	}
	outer, err := netns.Get()
	if !step("get netns", err) {
		return r
	}
	defer outer.Close()
	// `ip netns add sandbox-test`: /run/netns made a shared mount, a file
	// there bind-mounted on a new network namespace.
	_ = os.MkdirAll("/run/netns", 0o755)
	if unix.Mount("", "/run/netns", "none", unix.MS_SHARED|unix.MS_REC, "") != nil {
		if step("mount /run/netns", unix.Mount("/run/netns", "/run/netns", "none", unix.MS_BIND|unix.MS_REC, "")) {
			step("make /run/netns shared", unix.Mount("", "/run/netns", "none", unix.MS_SHARED|unix.MS_REC, ""))
		}
	}
	// A restart keeps the rootfs, and with it the file of the previous
	// run's namespace: `ip netns add` would fail on it (File exists).
	_ = unix.Unmount("/run/netns/sandbox-test", unix.MNT_DETACH)
	_ = os.Remove("/run/netns/sandbox-test")
	inner, err := netns.NewNamed("sandbox-test")
	if !step("ip netns add", err) {
		return r
	}
	defer inner.Close()
	if !step("back to the container's netns", netns.Set(outer)) {
		return r
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "veth-h-test"}, PeerName: "veth-s-test"}
	if !step("veth pair", netlink.LinkAdd(veth)) {
		return r
	}
	peer, err := netlink.LinkByName("veth-s-test")
	if !step("veth peer", err) || !step("move veth into the netns", netlink.LinkSetNsFd(peer, int(inner))) {
		return r
	}
	host, _ := netlink.LinkByName("veth-h-test")
	hostAddr, _ := netlink.ParseAddr("10.200.0.1/24")
	if !step("address 10.200.0.1/24", netlink.AddrAdd(host, hostAddr)) || !step("veth up", netlink.LinkSetUp(host)) {
		return r
	}
	ih, err := netlink.NewHandleAt(inner)
	if !step("netlink in the netns", err) {
		return r
	}
	defer ih.Close()
	ipeer, _ := ih.LinkByName("veth-s-test")
	lo, _ := ih.LinkByName("lo")
	innerAddr, _ := netlink.ParseAddr("10.200.0.2/24")
	if !step("address 10.200.0.2/24", ih.AddrAdd(ipeer, innerAddr)) || !step("inner veth up", ih.LinkSetUp(ipeer)) || !step("inner lo up", ih.LinkSetUp(lo)) {
		return r
	}
	if !step("default route via 10.200.0.1", ih.RouteAdd(&netlink.Route{LinkIndex: ipeer.Attrs().Index, Gw: net.IPv4(10, 200, 0, 1)})) {
		return r
	}
	// The proxy, on the host side of the veth, in the container's netns.
	proxy, err := net.Listen("tcp4", "10.200.0.1:3128")
	if !step("proxy listen 10.200.0.1:3128", err) {
		proxy = nil
	} else {
		go serveLine(proxy, "proxy")
	}
	// Transparent TCP in the inner netns: nft redirects tcp dport 443 to
	// a listener on 15001 there (install_transparent_tcp_rules).
	nft := &nftables.Conn{NetNS: int(inner)}
	table := nft.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "openshell"})
	chain := nft.AddChain(&nftables.Chain{Name: "output", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	nft.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(443)},
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(15001)},
		&expr.Redir{RegisterProtoMin: 1},
	}})
	step("nftables table, NAT chain and redirect rule in the netns", nft.Flush())
	// From the inner netns: the redirect, and the proxy over the veth.
	done := make(chan struct{})
	go func() {
		defer close(done)
		goruntime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if !step("enter the netns", netns.Set(inner)) {
			return
		}
		l, err := net.Listen("tcp4", "0.0.0.0:15001")
		if !step("listen 0.0.0.0:15001 in the netns", err) {
			return
		}
		go serveLine(l, "transparent")
		r["redirected 192.0.2.1:443"] = readLine("192.0.2.1:443")
		if proxy != nil {
			r["proxy from the netns"] = readLine("10.200.0.1:3128")
		}
	}()
	<-done
	return r
}

// serveLine answers every connection with one line.
func serveLine(l net.Listener, line string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, line)
		c.Close()
	}
}

// readLine connects to addr and returns the first line it sends.
func readLine(addr string) string {
	c, err := net.DialTimeout("tcp4", addr, 3*time.Second)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n == 0 && err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(buf[:n]))
}
