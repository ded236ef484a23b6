package seatbelt

import (
	"strings"
)

// sbplWriter builds profile text. Only static strings written in this file
// and parameter keys ever become string literals.
type sbplWriter struct {
	b strings.Builder
}

func (w *sbplWriter) String() string { return w.b.String() }

func (w *sbplWriter) line(s string) {
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

func (w *sbplWriter) comment(s string) {
	w.b.WriteString("\n; ")
	w.line(s)
}

// allow writes (allow ops... filters...), or, with excludes,
// (allow ops... (require-all (require-any filters...) (require-not
// (require-any excludes...)))). It never writes an allow without a filter
// for the operations it is given: callers skip empty sets.
func (w *sbplWriter) allow(ops, filters, excludes []string) {
	w.b.WriteString("(allow " + strings.Join(ops, " "))
	if len(excludes) == 0 {
		for _, f := range filters {
			w.b.WriteString("\n    " + f)
		}
		w.line(")")
		return
	}
	w.b.WriteString("\n    (require-all\n        (require-any")
	for _, f := range filters {
		w.b.WriteString("\n            " + f)
	}
	w.b.WriteString(")\n        (require-not\n            (require-any")
	for _, f := range excludes {
		w.b.WriteString("\n                " + f)
	}
	w.line("))))")
}

func lit(kind string, values ...string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = "(" + kind + " " + quote(v) + ")"
	}
	return out
}

// base writes the deny-default header and what every process needs to
// start on macOS.
func (w *sbplWriter) base() {
	w.line("(version 1)")
	w.line("(deny default)")

	w.comment("processes: fork, and signals and process information only within this sandbox")
	w.line("(allow process-fork)")
	w.allow([]string{"signal"}, []string{"(target same-sandbox)"}, nil)
	w.allow([]string{"process-info*"}, []string{"(target same-sandbox)"}, nil)

	w.comment("dyld, the shared cache, system libraries and frameworks")
	w.allow([]string{"file-read*", "file-map-executable"}, lit("subpath",
		"/usr/lib",
		"/System/Library",
		"/System/Cryptexes/OS",
		"/System/Volumes/Preboot/Cryptexes/OS",
		"/Library/Apple/usr/lib",
		"/Library/Apple/System/Library",
		"/private/var/db/dyld",
	), nil)

	w.comment("lookups through the root's symbolic links and the system's own directories")
	w.allow([]string{"file-read-metadata"}, lit("literal", baseMetadata()...), nil)

	w.comment("devices, time zone data")
	w.allow([]string{"file-read*", "file-write-data"}, lit("literal", "/dev/null", "/dev/zero"), nil)
	w.allow([]string{"file-read*"}, append(append(lit("literal",
		"/dev/random",
		"/dev/urandom",
		"/private/etc/localtime",
		"/private/var/select/sh",
	), lit("subpath", "/dev/fd")...), lit("subpath", "/private/var/db/timezone")...), nil)

	w.comment("sysctl reads the C library and the Go, Python and Node runtimes make at startup")
	filters := lit("sysctl-name",
		"hw.activecpu", "hw.byteorder", "hw.cachelinesize", "hw.cpufamily", "hw.cputype",
		"hw.l1dcachesize", "hw.l2cachesize", "hw.logicalcpu", "hw.logicalcpu_max", "hw.machine",
		"hw.memsize", "hw.model", "hw.ncpu", "hw.nperflevels", "hw.pagesize", "hw.physicalcpu",
		"hw.physicalcpu_max", "hw.vectorunit", "kern.argmax", "kern.bootargs", "kern.hostname",
		"kern.maxfilesperproc", "kern.maxproc", "kern.osproductversion", "kern.osrelease",
		"kern.ostype", "kern.osvariant_status", "kern.osversion", "kern.secure_kernel",
		"kern.usrstack64", "kern.version", "machdep.cpu.brand_string", "sysctl.proc_cputype",
		"sysctl.proc_translated",
	)
	filters = append(filters, lit("sysctl-name-prefix", "hw.optional.", "hw.perflevel")...)
	w.allow([]string{"sysctl-read"}, filters, nil)

	w.comment("user and group lookups (getpwuid, getgrgid)")
	w.allow([]string{"mach-lookup"}, lit("global-name", "com.apple.system.opendirectoryd.libinfo"), nil)
}

// network writes the narrowest rules that give a process the host's
// network: outbound IP (SBPL matches remote hosts only as * or localhost,
// so no per-host rule is possible), DNS through mDNSResponder's socket,
// and the services TLS certificate checks and resolver configuration use.
// Listening and inbound connections stay denied, as do unix sockets other
// than mDNSResponder's.
func (w *sbplWriter) network() {
	w.comment("network: the configuration has no network namespace (host network)")
	w.line("(allow system-socket)")
	w.allow([]string{"network-outbound"}, append([]string{`(remote ip "*:*")`}, lit("literal", "/private/var/run/mDNSResponder")...), nil)
	w.allow([]string{"mach-lookup"}, lit("global-name",
		"com.apple.SystemConfiguration.DNSConfiguration",
		"com.apple.SystemConfiguration.configd",
		"com.apple.trustd.agent",
		"com.apple.SecurityServer",
	), nil)
}

// baseMetadata are the directories whose metadata the base profile lets
// every process read.
func baseMetadata() []string {
	return []string{
		"/", "/tmp", "/var", "/etc", "/private", "/private/var", "/private/var/db", "/private/etc",
		"/System", "/System/Volumes", "/System/Volumes/Preboot", "/System/Cryptexes", "/Library",
		"/Library/Apple", "/usr",
	}
}

// quote returns s as an SBPL string literal. Only static strings and
// parameter keys are quoted; both are printable ASCII, and a backslash or
// quote is escaped anyway.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}
