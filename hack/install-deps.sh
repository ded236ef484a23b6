#!/usr/bin/env bash
# Installs what building and testing skillrun needs, from Debian's packages.
# Idempotent and quiet when everything is present. Usage:
#   hack/install-deps.sh build      # libseccomp-dev for the static seccomp build
#   hack/install-deps.sh test       # + runc, crun, containerd, podman, bwrap, busybox, ...
#   hack/install-deps.sh bench      # + hyperfine, gnuplot
set -euo pipefail

want_build=(libseccomp-dev pkg-config gcc make)
want_test=(runc crun containerd podman bubblewrap busybox-static uidmap jq python3 nodejs iproute2 procps psmisc util-linux strace)
want_bench=(hyperfine gnuplot-nox time)
want_cross=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)

pkgs=("${want_build[@]}")
case "${1:-build}" in
build) ;;
test) pkgs+=("${want_test[@]}") ;;
bench) pkgs+=("${want_test[@]}" "${want_bench[@]}") ;;
cross) pkgs+=("${want_cross[@]}") ;;
all) pkgs+=("${want_test[@]}" "${want_bench[@]}" "${want_cross[@]}") ;;
*) echo "usage: $0 build|test|bench|cross|all" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages ${missing[*]}; run as root (or: sudo $0 $*)" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
stamp=/var/lib/apt/periodic/skillrun-update-stamp
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ]; then
	apt-get update -qq >&2
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
