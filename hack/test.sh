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
{ [ -x "$bin" ] && [ -x "$bin-skills" ] && [ -x "$bin-openshell" ]; } || make static

# The rootless tests run the binary, and read skill folders, as the test
# user. A checkout in a folder that user cannot enter (a clone under
# `mktemp -d`, mode 0700) keeps them out of its reach: the suites then
# give it copies (tests/internal/hostcheck/stage.go), made in this
# world-traversable folder, removed on exit even when a suite is killed.
rootless_note=
if [ "$(id -u)" -eq 0 ]; then
	stage=$(mktemp -d "${TMPDIR:-/tmp}/skillrun-test-stage.XXXXXX")
	trap 'rm -rf "$stage"' EXIT
	chmod 0755 "$stage"
	export SKILLRUN_TEST_STAGE_DIR=$stage
	# Asked of the kernel as that user, from a folder it can enter.
	as_user() { (cd / && runuser -u "$SKILLRUN_TEST_USER" -- "$@"); }
	if ! as_user test -x "$bin"; then
		echo "test.sh: $SKILLRUN_TEST_USER cannot reach $bin (a parent folder is closed to it):" >&2
		echo "test.sh: the rootless tests run copies of the binary and of the skill folders they use, made in $stage" >&2
	fi
	if ! as_user test -x "$stage"; then
		rootless_note="the rootless tests could not run: $SKILLRUN_TEST_USER cannot enter $stage (TMPDIR=${TMPDIR:-/tmp}); they skipped, saying so (go test -v)"
		echo "test.sh: WARNING: $rootless_note" >&2
	fi
fi

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
	step unit-runtimeonly go test -tags "$TAGS runtimeonly" -count=1 ./cmd/skillrun
	step unit-openshell go test -tags "$TAGS openshell" -count=1 ./cmd/skillrun
	# A short fuzz run of each target beyond its committed seed corpus.
	step fuzz env FUZZTIME="${FUZZTIME:-10s}" hack/fuzz.sh
	# install-deps.sh demo installs only what make demo runs.
	step demo-deps hack/test-demo-deps.sh
fi
if [ "$what" = all ] || [ "$what" = integration ]; then
	step integration env RUNTIME="$bin" SKILLRUN="$bin" go test -tags integration -count=1 -timeout 30m ./tests/...
	if command -v runc >/dev/null; then
		# The core suite must pass against runc too: that proves the tests.
		step integration-runc env RUNTIME="$(command -v runc)" go test -tags integration -count=1 -timeout 15m ./tests/
		step clients-runc env RUNTIME="$(command -v runc)" go test -tags integration -count=1 -timeout 15m ./tests/clients/
	else
		echo "test.sh: no runc on PATH: tests/ and tests/clients/ are not run against runc (hack/install-deps.sh test installs it)" >&2
	fi
fi

echo
[ -z "$rootless_note" ] || echo "test.sh: WARNING: $rootless_note"
echo "test suites: ${passed} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
