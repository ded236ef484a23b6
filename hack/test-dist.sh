#!/usr/bin/env bash
# Checks the release path a user without a Go toolchain takes: every
# tarball of make dist (linux/amd64 and linux/arm64) holds binaries for its
# architecture, static, with seccomp compiled in (the arm64 ones run under
# qemu-user); the amd64 tarball installs with hack/install.sh into a fresh
# prefix, the binary runs, the man page and the bash completion work, and
# a tarball that does not match SHA256SUMS is refused with nothing
# installed. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then
	hack/install-deps.sh dist-test
fi
[ -f dist/SHA256SUMS ] || make dist
tarball=$(ls dist/skillrun-*-linux-amd64.tar.gz)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-dist: FAIL: $*" >&2; exit 1; }

# check_binaries TARBALL ARCH: the tarball's bin/skillrun, bin/skillrun-skills
# and bin/skillrun-openshell are static ELF executables for ARCH whose
# `features` reports seccomp enabled with libseccomp linked in (the skill
# spec always has a seccomp filter, and libcontainer built without seccomp
# refuses such a config: no sandbox would run). A foreign architecture's
# binary runs under qemu-user (hack/install-deps.sh dist-test installs it).
check_binaries() {
	local tarball=$1 arch=$2 d b desc want run=() feats
	d=$tmp/check-$arch
	mkdir -p "$d"
	tar -C "$d" -xzf "$tarball"
	case $arch in
	amd64) want='ELF 64-bit LSB executable, x86-64' ;;
	arm64) want='ELF 64-bit LSB executable, ARM aarch64' ;;
	*) fail "$tarball: unknown architecture $arch" ;;
	esac
	case $arch/$(uname -m) in
	amd64/x86_64 | arm64/aarch64) ;;
	arm64/*)
		command -v qemu-aarch64 >/dev/null || fail "qemu-aarch64 missing: cannot run the arm64 binaries (hack/install-deps.sh dist-test installs qemu-user)"
		run=(qemu-aarch64)
		;;
	*) fail "cannot run $arch binaries on $(uname -m)" ;;
	esac
	for b in "$d"/*/bin/skillrun "$d"/*/bin/skillrun-skills "$d"/*/bin/skillrun-openshell; do
		[ -f "$b" ] || fail "$tarball: no $b"
		desc=$(file -b "$b")
		[[ $desc == "$want"* ]] || fail "$(basename "$tarball"): ${b#"$d"/}: $desc; want $want"
		[[ $desc == *"statically linked"* ]] || fail "$(basename "$tarball"): ${b#"$d"/} is not static: $desc"
		feats=$("${run[@]}" "$b" features) || fail "$(basename "$tarball"): ${b#"$d"/} features exited $? (${run[*]:-natively})"
		[ "$(jq -r '.linux.seccomp.enabled' <<<"$feats")" = true ] ||
			fail "$(basename "$tarball"): ${b#"$d"/} was built without seccomp: features says linux.seccomp $(jq -c '.linux.seccomp' <<<"$feats")"
		[ "$(jq -r '.annotations["io.github.seccomp.libseccomp.version"] // empty' <<<"$feats")" != "" ] ||
			fail "$(basename "$tarball"): ${b#"$d"/}: features names no libseccomp version (not linked in)"
		# The build's own record agrees, when a Go toolchain is here.
		if command -v go >/dev/null; then
			go version -m "$b" | grep -Eq -- '-tags=([^ ]*,)?seccomp(,| |$)' ||
				fail "$(basename "$tarball"): ${b#"$d"/}: go version -m shows no seccomp build tag"
		fi
	done
	echo "test-dist: $(basename "$tarball"): bin/skillrun, bin/skillrun-skills and bin/skillrun-openshell are static $arch executables with seccomp (libseccomp $(jq -r '.annotations["io.github.seccomp.libseccomp.version"]' <<<"$feats"))${run[*]:+, run under ${run[*]}}"
}
n=0
for t in dist/skillrun-*-linux-*.tar.gz; do
	a=${t%.tar.gz}
	check_binaries "$t" "${a##*-linux-}"
	n=$((n + 1))
done
[ "$n" -ge 2 ] || fail "want the amd64 and arm64 tarballs in dist/, found $n"
hack/install.sh "$tarball" "$tmp/prefix" >/dev/null
# Capture first: "cmd | grep -q" under pipefail fails when grep exits before
# the command has written its last line (SIGPIPE, exit 141).
version=$("$tmp/prefix/bin/skillrun" --version) || fail "--version exited $?"
grep -q '^skillrun version ' <<<"$version" || fail "--version printed: $version"
# The OpenShell driver: its own binary, run by skillrun's command of the
# same name (its --help is the driver's, with its flags).
[ -x "$tmp/prefix/bin/skillrun-openshell" ] || fail "no bin/skillrun-openshell installed"
# The skills runner: its own binary, run by skillrun's skill, sandbox and
# mcp commands (their --help is its, with the subcommands).
[ -x "$tmp/prefix/bin/skillrun-skills" ] || fail "no bin/skillrun-skills installed"
help=$("$tmp/prefix/bin/skillrun" skill --help) || fail "skillrun skill --help exited $?"
grep -q -- 'exec' <<<"$help" || fail "skillrun skill --help is not the skills runner's: $help"
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
echo "test-dist: ok ($n tarballs: architecture, static, seccomp; $(basename "$tarball"): install, --version, the OpenShell driver binary, man page, bash completion, checksum refusal)"
