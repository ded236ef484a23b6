package openshell

// The sandbox's way to its gateway. OpenShell's gateway reaches a sandbox
// only through the supervisor, which dials OPENSHELL_ENDPOINT and holds
// ConnectSupervisor open. A sandbox keeps its own network namespace: the
// driver grants exactly the endpoint's host:port (and
// host.openshell.internal on that port) through skillrun's egress
// allowlist, mapped to the gateway's address on the host (as `--resolve`
// maps a name), so the sandbox's DNS answers those two names and its
// connections to them are relayed, TLS checked by its server name, to the
// gateway and nowhere else. The TLS client material is mounted where
// OpenShell's Docker driver mounts it.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skillrun/skillrun/egress/policy"
	pb "github.com/skillrun/skillrun/openshell/computev1"
)

// Names and paths in the sandbox that OpenShell's supervisor expects (its
// openshell-core container_paths; the same as the Docker driver's).
const (
	// HostOpenShellInternal is the name that stands for the gateway's
	// host in every sandbox (the Docker driver's extra_hosts entry).
	HostOpenShellInternal = "host.openshell.internal"
	// TLSCAPath, TLSCertPath and TLSKeyPath are where the supervisor's
	// client TLS material is mounted read-only (OPENSHELL_TLS_CA,
	// OPENSHELL_TLS_CERT, OPENSHELL_TLS_KEY).
	TLSCAPath   = "/etc/openshell/tls/client/ca.crt"
	TLSCertPath = "/etc/openshell/tls/client/tls.crt"
	TLSKeyPath  = "/etc/openshell/tls/client/tls.key"
)

// TLSFiles are the host paths of the supervisor's client TLS material: the
// CA that signed the gateway's certificate, and the client certificate
// and key the gateway's client CA accepts.
type TLSFiles struct{ CA, Cert, Key string }

// TLSDir returns the TLS files of a directory laid out as
// `openshell-gateway generate-certs --output-dir DIR` writes it (ca.crt,
// client/tls.crt, client/tls.key) or as the CLI's mtls directory (ca.crt,
// tls.crt, tls.key).
func TLSDir(dir string) TLSFiles {
	f := TLSFiles{CA: filepath.Join(dir, "ca.crt"), Cert: filepath.Join(dir, "client", "tls.crt"), Key: filepath.Join(dir, "client", "tls.key")}
	if _, err := os.Stat(f.Cert); err != nil {
		f.Cert, f.Key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	}
	return f
}

func (t TLSFiles) set() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// check loads the files: a CA certificate, and a certificate and key that
// belong together.
func (t TLSFiles) check() error {
	if t.CA == "" || t.Cert == "" || t.Key == "" {
		return errors.New("TLS: the CA, the client certificate and its key are all needed (--tls-ca, --tls-cert, --tls-key, or --tls-dir)")
	}
	ca, err := os.ReadFile(t.CA)
	if err != nil {
		return fmt.Errorf("TLS CA: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		return fmt.Errorf("TLS CA %s: no PEM certificate in it", t.CA)
	}
	if _, err := tls.LoadX509KeyPair(t.Cert, t.Key); err != nil {
		return fmt.Errorf("TLS client certificate %s and key %s: %w", t.Cert, t.Key, err)
	}
	return nil
}

// gateway is how sandboxes reach the gateway, worked out by New.
type gateway struct {
	// endpoint is OPENSHELL_ENDPOINT: Config.Endpoint, with an IP address
	// replaced by host.openshell.internal.
	endpoint string
	// host is the endpoint's host name: the TLS server name the
	// supervisor checks the gateway's certificate against.
	host string
	port int
	// addr is where connections to the endpoint's names go, on the
	// driver's host.
	addr netip.Addr
	// names are host.openshell.internal and host (once).
	names []string
	tls   bool
}

// newGateway works out the gateway's names and address from the
// configuration.
func newGateway(cfg *Config) (*gateway, error) {
	if cfg.Endpoint == "" {
		return nil, errors.New("openshell driver: no gateway endpoint (--endpoint)")
	}
	u, err := url.Parse(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", cfg.Endpoint, err)
	}
	g := &gateway{addr: cfg.GatewayAddress}
	switch u.Scheme {
	case "https":
		g.tls, g.port = true, 443
	case "http":
		g.port = 80
	default:
		return nil, fmt.Errorf("endpoint %q: want an http:// or https:// URL", cfg.Endpoint)
	}
	if u.User != nil || u.Hostname() == "" || u.Opaque != "" {
		return nil, fmt.Errorf("endpoint %q: want scheme://host[:port]", cfg.Endpoint)
	}
	if p := u.Port(); p != "" {
		if g.port, err = strconv.Atoi(p); err != nil || g.port < 1 || g.port > 65535 {
			return nil, fmt.Errorf("endpoint %q: bad port %q", cfg.Endpoint, p)
		}
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		// As the Docker driver: the supervisor dials the gateway by name
		// (host.openshell.internal), which the allowlist can check; the
		// address is where that name leads.
		ip = ip.Unmap()
		if g.addr.IsValid() && g.addr != ip {
			return nil, fmt.Errorf("endpoint %q names %s, --gateway-address %s", cfg.Endpoint, ip, g.addr)
		}
		g.addr = ip
		u.Host = net.JoinHostPort(HostOpenShellInternal, strconv.Itoa(g.port))
		g.host = HostOpenShellInternal
	} else if g.host, err = policy.NormalizeName(u.Hostname()); err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", cfg.Endpoint, err)
	}
	g.endpoint = u.String()
	if !g.addr.IsValid() {
		g.addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	g.addr = g.addr.Unmap()
	g.names = []string{HostOpenShellInternal}
	if g.host != HostOpenShellInternal {
		g.names = append(g.names, g.host)
	}
	switch {
	case g.tls:
		if err := cfg.TLS.check(); err != nil {
			return nil, fmt.Errorf("https endpoint %s: %w", cfg.Endpoint, err)
		}
	case cfg.TLS.set():
		return nil, fmt.Errorf("endpoint %q: TLS files are given but the endpoint is not https://", cfg.Endpoint)
	case !cfg.HostNetwork:
		// Plaintext gRPC is HTTP/2 with prior knowledge: it opens with
		// "PRI * HTTP/2.0" and carries no Host the relay could check (the
		// egress relay refuses it: egress TestRelayRefusesWhatIsNeitherTLSNorHTTP).
		return nil, fmt.Errorf("endpoint %q: the egress allowlist cannot pass plaintext gRPC (it carries no host name to check): use an https:// endpoint with TLS files, or --host-network", cfg.Endpoint)
	}
	return g, nil
}

// allow and resolve are the egress annotations of a sandbox: each name on
// the endpoint's port, mapped to the gateway's address.
func (g *gateway) allow() string {
	var rules []string
	for _, n := range g.names {
		rules = append(rules, n+":"+strconv.Itoa(g.port))
	}
	return strings.Join(rules, ",")
}

func (g *gateway) resolve() string {
	var maps []string
	for _, n := range g.names {
		maps = append(maps, n+":"+strconv.Itoa(g.port)+":"+g.addr.String())
	}
	return strings.Join(maps, ",")
}

// etcFiles are the sandbox's /etc/hosts and /etc/resolv.conf. Behind the
// allowlist the gateway's names are not in /etc/hosts: they resolve
// through the sandbox's DNS (127.0.0.1, the egress server's), whose
// synthetic addresses the relay maps back to the names. In the host's
// network namespace they resolve to the gateway's address in /etc/hosts,
// and the rest through the host's resolv.conf.
func (g *gateway) etcFiles(hostNetwork bool) (hosts, resolv string, err error) {
	hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	if !hostNetwork {
		return hosts, "nameserver 127.0.0.1\noptions attempts:2 timeout:2\n", nil
	}
	hosts += g.addr.String() + "\t" + strings.Join(g.names, " ") + "\n"
	data, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return "", "", fmt.Errorf("host resolv.conf: %w", err)
	}
	return hosts, string(data), nil
}

// listenerRequirements is what GetGatewayListenerRequirements answers:
// the gateway must listen where the relay (or, with the host's network,
// the supervisor) connects. On a loopback address that is the gateway's
// loopback listener on its primary port; on another address of this host,
// that exact address; an address of another host is the operator's
// business (nothing is asked).
func (g *gateway) listenerRequirements() []*pb.GatewayListenerRequirement {
	reason := "skillrun sandboxes reach the gateway at " + netip.AddrPortFrom(g.addr, uint16(g.port)).String() + " through the driver's egress relay"
	switch {
	case g.addr.IsLoopback():
		if g.addr != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
			return nil // the gateway's loopback listener is 127.0.0.1
		}
		return []*pb.GatewayListenerRequirement{{Reason: reason, Selector: &pb.GatewayListenerRequirement_LoopbackInterface{LoopbackInterface: &pb.GatewayLoopbackInterfaceRequirement{}}}}
	case localAddress(g.addr):
		return []*pb.GatewayListenerRequirement{{Reason: reason, Selector: &pb.GatewayListenerRequirement_ExactBindAddress{ExactBindAddress: netip.AddrPortFrom(g.addr, uint16(g.port)).String()}}}
	}
	return nil
}

// localAddress reports whether a is assigned to an interface of this host.
func localAddress(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(n.IP); ok && b.Unmap() == a {
				return true
			}
		}
	}
	return false
}
