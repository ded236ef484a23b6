// Package egress is skillrun's per-skill network allowlist: a sandbox keeps
// an empty network namespace (loopback only) and reaches exactly the
// host:port pairs its policy allows, through sockets that the container's
// init binds inside the sandbox's namespaces (package nsinit, before
// libcontainer's init runs) and hands to the host side, which serves them:
//
//   - DNS on 127.0.0.1:53 (UDP and TCP) answers allowed names with
//     synthetic addresses from 198.18.0.0/15 (assigned to the sandbox's
//     lo) and NXDOMAIN otherwise; it never forwards a query.
//   - A connection to a synthetic address is matched to the (name, port)
//     it stands for; TLS must carry that name as SNI, plain HTTP that
//     name as Host in every request (until the host answers 101 to an
//     upgrade), and anything else is refused; the name is resolved on
//     the host only after the
//     policy check, and loopback, private, link-local and metadata
//     addresses are refused unless the operator mapped the name to an
//     address explicitly (Policy.Resolve).
//   - An HTTP proxy on 127.0.0.1:3128 (CONNECT and absolute-form
//     requests) applies the same rules for clients that honour
//     HTTP_PROXY/HTTPS_PROXY.
//
// The host side holds the only copies of the listening sockets: when it
// stops, the sandbox has no network at all (fail closed).
//
// The API is small: ParseRule and Rule.Match (the pattern rules), Listen
// and Handoff.Accept (receive the sockets from the sandbox), Serve (serve
// them until the context ends), the Report of what was refused, and
// HelperMain (a detached server's life). The runtime's side of the
// handoff socket (its connection, the helper's listener) is package
// handoff, which links neither HTTP nor TLS.
package egress
