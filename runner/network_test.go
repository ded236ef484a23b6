package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/skillrun/skillrun/egress"
)

// TestCapNetwork: the network section's JSON, its hosts aside, stays
// within MaxNetworkBytes whatever the refusals hold (HTML-escaped
// characters cost 6 bytes each); refusals of a bound are kept first;
// what is left out is counted. Control: a section that fits is kept
// whole.
func TestCapNetwork(t *testing.T) {
	small := &Network{Mode: "allowlist", Hosts: []string{"api.test:443"}, Refused: []egress.Refusal{{Host: "a", Reason: "r", Count: 2}}}
	capNetwork(small, MaxNetworkBytes)
	if len(small.Refused) != 1 || small.RefusedDropped != 0 {
		t.Errorf("control: a small section was cut: %+v", small)
	}

	var rs []egress.Refusal
	for i := range 100 {
		rs = append(rs, egress.Refusal{Host: fmt.Sprint(i) + strings.Repeat("<", 256), Port: 80, Reason: strings.Repeat("&", 200), Count: 3})
	}
	rs = append(rs, egress.Refusal{Host: "api.test", Port: 80, Reason: "limit: 256 connections open at once", Count: 7})
	hosts := make([]string, 500)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host%d.example.org:443", i)
	}
	n := &Network{Mode: "allowlist", Hosts: hosts, Refused: rs, RefusedDropped: 5}
	before, _ := json.Marshal(n)
	capNetwork(n, MaxNetworkBytes)
	n.Hosts = nil
	after, _ := json.Marshal(n)
	if len(after) > MaxNetworkBytes {
		t.Errorf("the section is %d bytes (its hosts aside), want <= %d (it was %d)", len(after), MaxNetworkBytes, len(before))
	}
	if len(n.Refused) == 0 || len(n.Refused) == len(rs) {
		t.Errorf("%d of %d refusals kept", len(n.Refused), len(rs))
	}
	limit := false
	for _, r := range n.Refused {
		limit = limit || strings.HasPrefix(r.Reason, "limit: ")
	}
	if !limit {
		t.Errorf("the refusal of a bound was left out")
	}
	if want := int64(5 + 3*(len(rs)-len(n.Refused))); n.RefusedDropped != want {
		t.Errorf("refused_dropped %d, want %d", n.RefusedDropped, want)
	}
}
