package skillenv

import (
	"bufio"
	"context"
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
)

// Default package indexes.
const (
	DefaultPipIndex    = "https://pypi.org/simple/"
	DefaultNpmRegistry = "https://registry.npmjs.org/"
)

// Index is where builds fetch packages from: the operator's settings.
type Index struct {
	// PipIndexURL is a PEP 503 simple index.
	PipIndexURL string
	// NpmRegistry is an npm registry.
	NpmRegistry string
	// PipCert and NpmCAFile are CA bundles (host paths) the operator's
	// pip (PIP_CERT, pip.conf cert) and Node/npm (NODE_EXTRA_CA_CERTS,
	// ~/.npmrc cafile) trust; copied into the build. Empty: the sandbox's
	// defaults (the host's /etc/ssl for pip, Node's bundled roots).
	PipCert   string
	NpmCAFile string
}

// OperatorIndex reads the operator's own index settings: PIP_INDEX_URL,
// else index-url of the [global] (or [install]) section of pip's
// configuration files; npm_config_registry, else the registry= line of
// ~/.npmrc. Only those keys are read: credentials and other settings in
// those files never reach a build. Empty means the default.
func OperatorIndex() Index {
	var ix Index
	if v := os.Getenv("PIP_INDEX_URL"); v != "" {
		ix.PipIndexURL = v
	} else {
		var files []string
		files = append(files, "/etc/pip.conf", "/etc/xdg/pip/pip.conf")
		if home, err := os.UserHomeDir(); err == nil {
			files = append(files, filepath.Join(home, ".pip", "pip.conf"))
			cfg := os.Getenv("XDG_CONFIG_HOME")
			if cfg == "" {
				cfg = filepath.Join(home, ".config")
			}
			files = append(files, filepath.Join(cfg, "pip", "pip.conf"))
		}
		for _, f := range files { // later files override earlier ones, as in pip
			if v := iniValue(f, []string{"global", "install"}, "index-url"); v != "" {
				ix.PipIndexURL = v
			}
		}
	}
	if v := os.Getenv("PIP_CERT"); v != "" {
		ix.PipCert = v
	}
	if v := os.Getenv("NODE_EXTRA_CA_CERTS"); v != "" {
		ix.NpmCAFile = v
	}
	if home, err := os.UserHomeDir(); err == nil && ix.NpmCAFile == "" {
		ix.NpmCAFile = iniValue(filepath.Join(home, ".npmrc"), nil, "cafile")
	}
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := os.Getenv(k); v != "" && ix.NpmRegistry == "" {
			ix.NpmRegistry = v
		}
	}
	if ix.NpmRegistry == "" {
		if home, err := os.UserHomeDir(); err == nil {
			ix.NpmRegistry = iniValue(filepath.Join(home, ".npmrc"), nil, "registry")
		}
	}
	return ix
}

// iniValue reads key from an INI-style file: in one of sections, or at
// the top level when sections is nil.
func iniValue(file string, sections []string, key string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	in := sections == nil
	val := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			name := strings.TrimSpace(line[1 : len(line)-1])
			in = false
			for _, s := range sections {
				in = in || s == name
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && in && strings.TrimSpace(k) == key {
			val = strings.TrimSpace(v)
		}
	}
	return val
}

// indexAccess is how a build reaches one index through the egress
// allowlist.
type indexAccess struct {
	// URL is what the installer is given (the host may be a synthetic
	// name standing for an address the operator wrote).
	URL string
	// Allow is the HOST:PORT rule granted.
	Allow string
	// Resolve is a NAME:PORT:ADDRESS mapping, or "".
	Resolve string
	// Insecure is set for plain-HTTP indexes (pip's --trusted-host).
	Insecure string
}

// access turns the operator's index URL into what the build is granted.
// A host named by an address (127.0.0.1, [::1], localhost) gets a
// synthetic name (synth) mapped to that address: the allowlist names
// hosts. A named host is resolved once, here: when it has no public
// address it is mapped explicitly to its first one (the operator chose
// that index), so that the build reaches exactly the address the host's
// resolver gave.
func access(ctx context.Context, raw, synth string, lookup func(context.Context, string) ([]netip.Addr, error)) (*indexAccess, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("index %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("index %q: want an http or https URL", raw)
	}
	if u.User != nil {
		return nil, fmt.Errorf("index %q: credentials in the URL are not supported", u.Redacted())
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("index %q: no host", raw)
	}
	port := 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("index %q: bad port %q", raw, p)
		}
	}
	a := &indexAccess{}
	addr, isAddr := netip.Addr{}, false
	if host == "localhost" {
		addr, isAddr = netip.MustParseAddr("127.0.0.1"), true
	} else if ip, err := netip.ParseAddr(host); err == nil {
		addr, isAddr = ip.Unmap(), true
	}
	if isAddr {
		if u.Scheme == "https" {
			return nil, fmt.Errorf("index %q: an https index must be named by its host name (its certificate names it)", raw)
		}
		host = synth
		a.Resolve = fmt.Sprintf("%s:%d:%s", host, port, addr)
	} else {
		addrs, err := lookup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("index %q: look up %s: %w", raw, host, err)
		}
		public := false
		for _, ad := range addrs {
			public = public || policy.IsPublic(ad)
		}
		if !public && len(addrs) > 0 {
			a.Resolve = fmt.Sprintf("%s:%d:%s", host, port, addrs[0].Unmap())
		}
	}
	hp := net.JoinHostPort(host, strconv.Itoa(port))
	if _, err := policy.ParseRule(hp); err != nil {
		return nil, fmt.Errorf("index %q: %w", raw, err)
	}
	a.Allow = hp
	u.Host = hp
	a.URL = u.String()
	if u.Scheme == "http" {
		a.Insecure = hp
	}
	return a, nil
}

// CheckIndexURL checks an index URL the way a build will use it, without
// resolving its host: for the operator's flags, before anything runs.
func CheckIndexURL(raw string) error {
	_, err := access(context.Background(), raw, "index.skillrun.internal", func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
	})
	return err
}

// lookupHost is the host's resolver.
func lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	return addrs, err
}
