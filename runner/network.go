package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/skillrun/skillrun/egress"
	"github.com/skillrun/skillrun/egress/nsinit"
	"github.com/skillrun/skillrun/egress/policy"
	"github.com/skillrun/skillrun/spec"
)

// MaxNetworkBytes bounds the JSON of a result's network section, its
// hosts (the operator's grant) aside: refusals that would not fit are
// left out and counted in refused_dropped, those of a bound ("limit: "
// reasons) kept first. With the egress server's own bounds (116 distinct
// refusals, hosts cut to 256 bytes and reasons to 200) the section could
// otherwise reach about 300 KiB of JSON.
const MaxNetworkBytes = 64 << 10

// Network is the network section of a Result: what the skill was allowed
// to reach and what it was refused.
type Network struct {
	// Mode is "allowlist".
	Mode string `json:"mode"`
	// Hosts are the granted host:port rules.
	Hosts []string `json:"hosts"`
	// Connections counts connections relayed to an allowed host.
	Connections int64 `json:"connections"`
	// Refused lists refused attempts (DNS queries have no port).
	Refused []egress.Refusal `json:"refused"`
	// RefusedDropped counts refusals beyond the list's bound.
	RefusedDropped int64 `json:"refused_dropped,omitempty"`
	// Error is set when the egress server failed (the skill then had no
	// network).
	Error string `json:"error,omitempty"`
}

// egressRun is the egress server of one run.
type egressRun struct {
	handoff *egress.Handoff
	hosts   []string
	cancel  context.CancelFunc
	done    chan struct{}
	report  *egress.Report
	err     error
}

// startEgress starts the egress server of a granted allowlist (passed as
// a value, not through the spec's annotations, inside one process): the
// handoff socket in the bundle folder dir (which the container never
// sees: only the runtime connects to it), and a goroutine that receives
// the sockets and serves them until stop.
func startEgress(dir string, granted *spec.Policy) (*egressRun, error) {
	pol, err := policy.FromLists(granted.Hosts, granted.Resolve)
	if err != nil {
		return nil, fmt.Errorf("network allowlist: %w", err)
	}
	h, err := egress.Listen(filepath.Join(dir, nsinit.SocketName), -1, -1)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &egressRun{handoff: h, hosts: granted.Hosts, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		socks, err := h.Accept(ctx, pol.Ports())
		if err != nil {
			if ctx.Err() == nil {
				e.err = err
			}
			return
		}
		e.report = egress.Serve(ctx, socks, pol)
	}()
	return e, nil
}

// stop stops the server (the skill loses its network) and returns the
// result's network section.
func (e *egressRun) stop() *Network {
	e.cancel()
	<-e.done
	e.handoff.Close()
	n := &Network{Mode: spec.NetworkAllowlist, Hosts: e.hosts, Refused: []egress.Refusal{}}
	if e.report != nil {
		n.Connections = e.report.Connections
		if e.report.Refused != nil {
			n.Refused = e.report.Refused
		}
		n.RefusedDropped = e.report.RefusedDropped
	}
	if e.err != nil {
		n.Error = e.err.Error()
	}
	capNetwork(n, MaxNetworkBytes)
	return n
}

// capNetwork leaves out of n's refusals, besides its hosts, what does not
// fit in max bytes of JSON (json.Marshal's, which escapes more than the
// result's encoder): refusals of a bound first, then the others in their
// order, while they fit.
func capNetwork(n *Network, max int) {
	hosts, refused := n.Hosts, n.Refused
	n.Hosts, n.Refused = nil, []egress.Refusal{}
	b, _ := json.Marshal(n)
	n.Hosts = hosts
	// What is left for the list: refused_dropped grows to at most 20
	// digits and its key.
	room := max - len(b) - len(`,"refused_dropped":`) - 20
	size := make([]int, len(refused))
	for i, r := range refused {
		rb, _ := json.Marshal(r)
		size[i] = len(rb) + 1 // and a comma
	}
	keep := make([]bool, len(refused))
	for _, limits := range []bool{true, false} {
		for i, r := range refused {
			if strings.HasPrefix(r.Reason, "limit: ") == limits && size[i] <= room {
				keep[i], room = true, room-size[i]
			}
		}
	}
	n.Refused = refused[:0:0]
	for i, r := range refused {
		if keep[i] {
			n.Refused = append(n.Refused, r)
		} else {
			n.RefusedDropped += int64(r.Count)
		}
	}
}
