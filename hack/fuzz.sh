#!/usr/bin/env bash
# Runs every Go fuzz target for FUZZTIME each (default 10s: the short run
# `make test` does through hack/test.sh; `make fuzz` runs 2m each).
# The committed seed corpora (testdata/fuzz/<FuzzName>/) run as plain
# tests in `go test ./...` too; this explores beyond them. A failing input
# is written to testdata/fuzz/<FuzzName>/ of its package: commit it with
# the fix as a regression seed.
#
#   hack/fuzz.sh               all targets, 10s each
#   FUZZTIME=2m hack/fuzz.sh   longer (make fuzz)
#   hack/fuzz.sh FuzzDNSQuery  the targets named
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
# PACKAGE TARGET: what each one reads.
targets=(
	"./spec FuzzParseSkillMD"                # SKILL.md
	"./spec FuzzManifest"                    # sandbox.yaml
	"./runtime FuzzParseSpec"                # an OCI config.json
	"./seatbelt FuzzNoPathInProfile"         # bind sources in a Seatbelt profile
	"./egress FuzzRelayRequests"             # the relay's HTTP requests (a connection's bytes)
	"./egress FuzzClientHello"               # the relay's TLS ClientHello checks
	"./egress FuzzDNSQuery"                  # the sandbox's DNS stub
	"./openshell FuzzParseQuantity"          # OpenShell resource quantities
)
failed=0 ran=0
for t in "${targets[@]}"; do
	read -r pkg name _ <<<"$t"
	if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
		continue
	fi
	ran=$((ran + 1))
	echo "=== fuzz $name ($pkg, $FUZZTIME)"
	if ! go test -run "^${name}\$" -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
		failed=$((failed + 1))
	fi
done
echo "fuzz: $ran targets, $failed failed"
[ "$failed" -eq 0 ]
