// Package nsinit is the sandbox's side of the egress handoff, run by the
// container's own init (`BINARY init`, before libcontainer's) inside the
// container's namespaces: it gives lo the synthetic range, binds the
// sandbox's DNS socket and TCP listeners and sends them over a unix socket
// the runtime passed to the init, to the egress server that serves them.
//
// It is small on purpose: the container's init imports it, and every
// package it pulls in is initialised in every container's init.
package nsinit

import (
	"net/netip"
	"sort"
	"time"
)

// SocketName is the name of an egress server's handoff socket (in a folder
// of its own): the init takes a passed descriptor for the handoff only
// when it is connected to a socket of that name.
const SocketName = "egress.sock"

// Ports of the sandbox's DNS (UDP and TCP on 127.0.0.1) and proxy.
const (
	DNSPort   = 53
	ProxyPort = 3128
)

// SyntheticPrefix is the range the sandbox's DNS answers from, assigned
// to its lo. It is the benchmarking range (RFC 2544), never routed on the
// internet.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

// SyntheticLo is the address lo gets (with the prefix, the whole range is
// local to the sandbox); the DNS never hands it out.
var SyntheticLo = netip.MustParseAddr("198.18.0.1")

// Timeout bounds each side's wait for the other.
const Timeout = 10 * time.Second

// Request is what the egress server asks the sandbox's side for (one line
// of JSON).
type Request struct {
	Ports []int `json:"ports"`
}

// Reply describes the descriptors sent with it, in order: the DNS's UDP
// socket, one TCP listener per port of TCP, then a pidfd of the init.
// Error, when set, says why none were sent.
type Reply struct {
	TCP   []int  `json:"tcp"`
	Pidfd bool   `json:"pidfd"`
	Error string `json:"error,omitempty"`
}

// WantPorts is ports plus the DNS's and the proxy's, sorted, distinct.
func WantPorts(ports []int) []int {
	seen := map[int]bool{DNSPort: true, ProxyPort: true}
	out := []int{DNSPort, ProxyPort}
	for _, p := range ports {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Ints(out)
	return out
}
