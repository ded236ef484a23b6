#!/usr/bin/env bash
# Runs every Go fuzz target for a short time (FUZZTIME, default 10s each).
# The committed seed corpora (testdata/fuzz/<FuzzName>/) run as plain
# tests in `go test ./...` too; this explores beyond them. A failing input
# is written to testdata/fuzz/<FuzzName>/ of its package: commit it with
# the fix as a regression seed.
#
#   hack/fuzz.sh               all targets, 10s each
#   FUZZTIME=2m hack/fuzz.sh   longer
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
targets=(
	"./spec FuzzParseSkillMD"
	"./spec FuzzManifest"
	"./runtime FuzzParseSpec"
)
failed=0
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	echo "=== fuzz $name ($pkg, $FUZZTIME)"
	if ! go test -run "^${name}\$" -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
		failed=$((failed + 1))
	fi
done
echo "fuzz: ${#targets[@]} targets, $failed failed"
[ "$failed" -eq 0 ]
