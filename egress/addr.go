package egress

import (
	"github.com/skillrun/skillrun/egress/nsinit"
)

// SyntheticPrefix is the range the sandbox's DNS answers from, assigned
// to its lo. It is the benchmarking range (RFC 2544), never routed on the
// internet.
var SyntheticPrefix = nsinit.SyntheticPrefix

// syntheticLo is the address lo gets (with the prefix, the whole range is
// local to the sandbox); the DNS never hands it out.
var syntheticLo = nsinit.SyntheticLo

// Loopback addresses of the sandbox's DNS and proxy.
const (
	DNSPort   = nsinit.DNSPort
	ProxyPort = nsinit.ProxyPort
)
