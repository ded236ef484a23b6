#!/usr/bin/env bash
# Checks the release path a user without a Go toolchain takes: make dist's
# tarball installs with hack/install.sh into a fresh prefix, the binary
# runs, the man page and the bash completion work, and a tarball that does
# not match SHA256SUMS is refused with nothing installed. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f dist/SHA256SUMS ] || make dist
tarball=$(ls dist/skillrun-*-linux-amd64.tar.gz)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-dist: FAIL: $*" >&2; exit 1; }
hack/install.sh "$tarball" "$tmp/prefix" >/dev/null
# Capture first: "cmd | grep -q" under pipefail fails when grep exits before
# the command has written its last line (SIGPIPE, exit 141).
version=$("$tmp/prefix/bin/skillrun" --version) || fail "--version exited $?"
grep -q '^skillrun version ' <<<"$version" || fail "--version printed: $version"
# The OpenShell driver: its own binary, run by skillrun's command of the
# same name (its --help is the driver's, with its flags).
[ -x "$tmp/prefix/bin/skillrun-openshell" ] || fail "no bin/skillrun-openshell installed"
help=$("$tmp/prefix/bin/skillrun" openshell-driver --help) || fail "skillrun openshell-driver --help exited $?"
grep -q -- '--supervisor-bin' <<<"$help" || fail "skillrun openshell-driver --help is not the driver's: $help"
grep -q '^\.TH skillrun 8' "$tmp/prefix/share/man/man8/skillrun.8" || fail "man page"
grep -q '^\.SH COMMANDS' "$tmp/prefix/share/man/man8/skillrun.8" || fail "man page has no COMMANDS section"
words=$(PATH="$tmp/prefix/bin:$PATH" bash -c '. "$1"; COMP_WORDS=(skillrun sk); COMP_CWORD=1; _skillrun; echo "${COMPREPLY[*]}"' _ "$tmp/prefix/share/bash-completion/completions/skillrun")
[ "$words" = skill ] || fail "bash completion of 'skillrun sk': '$words', want 'skill'"
words=$(PATH="$tmp/prefix/bin:$PATH" bash -c '. "$1"; COMP_WORDS=(skillrun skill ex); COMP_CWORD=2; _skillrun; echo "${COMPREPLY[*]}"' _ "$tmp/prefix/share/bash-completion/completions/skillrun")
[ "$words" = exec ] || fail "bash completion of 'skillrun skill ex': '$words', want 'exec'"
# A tampered tarball is refused and installs nothing.
mkdir "$tmp/bad"
cp "$tarball" dist/SHA256SUMS "$tmp/bad/"
printf 'x' >>"$tmp/bad/$(basename "$tarball")"
if hack/install.sh "$tmp/bad/$(basename "$tarball")" "$tmp/bad-prefix" 2>"$tmp/err"; then
	fail "a tampered tarball was installed"
fi
grep -q 'does not match SHA256SUMS' "$tmp/err" || fail "tampered tarball: $(cat "$tmp/err")"
[ ! -e "$tmp/bad-prefix" ] || fail "a refused install left $tmp/bad-prefix"
echo "test-dist: ok ($(basename "$tarball"): install, --version, the OpenShell driver binary, man page, bash completion, checksum refusal)"
