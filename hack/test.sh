#!/usr/bin/env bash
# Runs skillrun's tests. What `make test` (the README's test command) and
# CI run. Installs what the tests need (Debian packages, the unprivileged
# test user) when run as root.
#
#   hack/test.sh              unit + integration against bin/skillrun + the
#                             core suite again against runc (proves the tests)
#   hack/test.sh unit         unit tests only
#   hack/test.sh integration  black-box suites only
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
TAGS="seccomp osusergo netgo urfave_cli_no_docs"
export GOFLAGS=${GOFLAGS:-}

if [ "$(id -u)" -eq 0 ]; then
	hack/install-deps.sh test
	SKILLRUN_TEST_USER=$(hack/ensure-test-user.sh)
	export SKILLRUN_TEST_USER
else
	echo "test.sh: not root: root-only and rootless-as-other-user tests will skip with a reason" >&2
fi

bin=$(pwd)/bin/skillrun
[ -x "$bin" ] || make static
# The rootless tests run the binary as another user: it must be reachable.
chmod o+rx "$(pwd)" "$(pwd)/bin" 2>/dev/null || true

declare -a failed=()
passed=0
step() {
	local name=$1
	shift
	echo "=== $name: $*"
	if "$@"; then
		passed=$((passed + 1))
	else
		failed+=("$name")
	fi
}

if [ "$what" = all ] || [ "$what" = unit ]; then
	step unit go test -tags "$TAGS" -count=1 ./...
	# A short fuzz run of each target beyond its committed seed corpus.
	step fuzz env FUZZTIME="${FUZZTIME:-10s}" hack/fuzz.sh
fi
if [ "$what" = all ] || [ "$what" = integration ]; then
	step integration env RUNTIME="$bin" SKILLRUN="$bin" go test -tags integration -count=1 -timeout 30m ./tests/...
	if command -v runc >/dev/null; then
		# The core suite must pass against runc too: that proves the tests.
		step integration-runc env RUNTIME="$(command -v runc)" go test -tags integration -count=1 -timeout 15m ./tests/
		step clients-runc env RUNTIME="$(command -v runc)" go test -tags integration -count=1 -timeout 15m ./tests/clients/
	fi
fi

echo
echo "test suites: ${passed} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
