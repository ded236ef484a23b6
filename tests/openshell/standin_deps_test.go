//go:build integration

package openshell_test

// The stand-in supervisor (testdata/supervisor, which the go tool does not
// see when it tidies the module) sets up nftables as OpenShell's
// supervisor does, with google/nftables, the Go library of the field: this
// import keeps it in go.mod. It is linked into no product binary.
import _ "github.com/google/nftables"
