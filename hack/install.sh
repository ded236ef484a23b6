#!/usr/bin/env bash
# Installs a skillrun release tarball (make dist): checks it against the
# SHA256SUMS file next to it, then installs the binaries (skillrun, the OCI
# runtime; skillrun-skills, the skills runner; skillrun-openshell, the
# OpenShell driver), the man page and
# the shell completions under PREFIX (default /usr/local), and says what it
# installed. Nothing else is touched: no Go toolchain, no packages.
#
#   hack/install.sh skillrun-VERSION-linux-ARCH.tar.gz [PREFIX]
set -euo pipefail
tarball=${1:?usage: hack/install.sh TARBALL [PREFIX]}
prefix=${2:-/usr/local}
[ -f "$tarball" ] || { echo "install: $tarball: no such file" >&2; exit 2; }
sums=$(dirname "$tarball")/SHA256SUMS
if [ -f "$sums" ]; then
	want=$(awk -v f="$(basename "$tarball")" '$2 == f || $2 == "*" f {print $1}' "$sums")
	[ -n "$want" ] || { echo "install: $(basename "$tarball") is not in $sums" >&2; exit 1; }
	got=$(sha256sum "$tarball" | cut -d' ' -f1)
	[ "$got" = "$want" ] || { echo "install: $tarball: sha256 $got does not match SHA256SUMS ($want)" >&2; exit 1; }
	echo "install: sha256 ok"
else
	echo "install: warning: no SHA256SUMS next to $tarball: not verified" >&2
fi
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac
case $(basename "$tarball") in
*-linux-"$arch".tar.gz) ;;
*) echo "install: $(basename "$tarball") is not for linux/$arch" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$tarball"
src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
install -D -m 0755 "$src/bin/skillrun" "$prefix/bin/skillrun"
install -D -m 0755 "$src/bin/skillrun-skills" "$prefix/bin/skillrun-skills"
install -D -m 0755 "$src/bin/skillrun-openshell" "$prefix/bin/skillrun-openshell"
install -D -m 0644 "$src/share/man/man8/skillrun.8" "$prefix/share/man/man8/skillrun.8"
install -D -m 0644 "$src/share/bash-completion/completions/skillrun" "$prefix/share/bash-completion/completions/skillrun"
install -D -m 0644 "$src/share/zsh/site-functions/_skillrun" "$prefix/share/zsh/site-functions/_skillrun"
echo "install: $prefix/bin/skillrun ($("$prefix/bin/skillrun" --version | sed -n 1p))"
echo "install: $prefix/bin/skillrun-skills (the skills runner: skillrun skill, sandbox and mcp run it)"
echo "install: $prefix/bin/skillrun-openshell (the OpenShell driver: skillrun openshell-driver runs it)"
echo "install: $prefix/share/man/man8/skillrun.8, bash and zsh completions"
