#!/usr/bin/env bash
# Installs what building and testing skillrun needs, from Debian's packages.
# Idempotent and quiet when everything is present. Usage:
#   hack/install-deps.sh build      # libseccomp-dev for the static seccomp build
#   hack/install-deps.sh demo       # + what make demo runs: python3, pip, node, npm, runuser (nothing else)
#   hack/install-deps.sh test       # + runc, crun, containerd, podman, bwrap, busybox, ...
#   hack/install-deps.sh bench      # + hyperfine, gnuplot
#   hack/install-deps.sh cross      # + the aarch64 cross compiler and libseccomp for arm64 (make cross, make dist)
#   hack/install-deps.sh dist-test  # + qemu-user, jq: hack/test-dist.sh runs the arm64 binary
#   hack/install-deps.sh proto      # + protoc, and the Go plugins in bin/tools
set -euo pipefail

want_build=(libseccomp-dev pkg-config gcc make file) # file: make static checks the binary is static
want_test=(runc crun containerd podman bubblewrap busybox-static uidmap jq python3 python3-pip python3-setuptools python3-wheel nodejs iproute2 procps psmisc util-linux strace)
# make demo: python3 and node for the example skills (pip and npm build
# their packages), util-linux's runuser for the rootless part. Nothing
# else: hack/test-demo-deps.sh checks that each is used.
want_demo=(python3 python3-pip nodejs util-linux) # npm: see npm_if_missing
want_bench=(hyperfine gnuplot-nox time)
# The linux/arm64 build links libseccomp.a for arm64 (Debian multiarch:
# the arm64 architecture is added to dpkg first).
want_cross=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross libseccomp-dev:arm64)
# hack/test-dist.sh: runs the arm64 binary's `features` under qemu-user
# (called explicitly: no binfmt registration is installed), reads it with jq.
want_dist_test=(qemu-user jq)
want_proto=(protobuf-compiler libprotobuf-dev) # libprotobuf-dev: google/protobuf/struct.proto

# protoc's Go plugins, built from the Go module proxy into bin/tools at the
# protobuf version go.mod pins (Debian's protoc-gen-go is the old v1.3 API).
# Used by `make proto` only: the generated code is committed.
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0
# grpcurl, for the OpenShell driver test that calls the socket from the
# command line (not packaged in Debian 12); built once into bin/tools.
GRPCURL_VERSION=v1.9.3
proto_plugins() {
	local root tools pbver
	root=$(cd "$(dirname "$0")/.." && pwd)
	tools=$root/bin/tools
	pbver=$(cd "$root" && go list -m -f '{{.Version}}' google.golang.org/protobuf)
	[ -x "$tools/protoc-gen-go" ] && [[ $("$tools/protoc-gen-go" --version 2>/dev/null) == *"$pbver"* ]] ||
		GOBIN=$tools go install "google.golang.org/protobuf/cmd/protoc-gen-go@$pbver"
	[ -x "$tools/protoc-gen-go-grpc" ] && [[ $("$tools/protoc-gen-go-grpc" --version 2>/dev/null) == *"${PROTOC_GEN_GO_GRPC_VERSION#v}"* ]] ||
		GOBIN=$tools go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
}

pkgs=("${want_build[@]}")
case "${1:-build}" in
build) ;;
demo) pkgs+=("${want_demo[@]}") ;;
test) pkgs+=("${want_test[@]}") ;;
bench) pkgs+=("${want_test[@]}" "${want_bench[@]}") ;;
cross) pkgs+=("${want_cross[@]}") ;;
dist-test) pkgs+=("${want_dist_test[@]}") ;;
proto) pkgs+=("${want_proto[@]}") ;;
all) pkgs+=("${want_test[@]}" "${want_bench[@]}" "${want_cross[@]}" "${want_dist_test[@]}" "${want_proto[@]}") ;;
*) echo "usage: $0 build|demo|test|bench|cross|dist-test|proto|all" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm: Debian's package, unless the machine's Node.js already ships one
# (NodeSource's does, and conflicts with Debian's).
npm_if_missing() {
	if ! command -v npm >/dev/null; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "install-deps: npm missing; run as root" >&2
			exit 1
		fi
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >&2
	fi
}

go_tools() {
	case "${1:-build}" in
	proto) proto_plugins ;;
	demo) npm_if_missing ;;
	test | bench | all)
		npm_if_missing
		local tools
		tools=$(cd "$(dirname "$0")/.." && pwd)/bin/tools
		[ -x "$tools/grpcurl" ] || GOBIN=$tools go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION"
		inspector
		;;
	esac
}
# The MCP Inspector (a real third-party MCP client, tests/skills/inspector_test.go), from the npm
# registry at the versions tests/mcp-inspector/package-lock.json pins, the Node.js it runs on
# included (the inspector 2.x needs Node >= 22.19). Reinstalled when the lock file changes.
inspector() {
	local dir
	dir=$(cd "$(dirname "$0")/.." && pwd)/tests/mcp-inspector
	command -v npm >/dev/null || { echo "install-deps: npm missing: the MCP Inspector test cannot run" >&2; return 1; }
	if [ ! -f "$dir/node_modules/.package-lock.json" ] || ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.skillrun-lock"; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) && cp "$dir/package-lock.json" "$dir/node_modules/.skillrun-lock"
	fi
}

if [ ${#missing[@]} -eq 0 ]; then
	go_tools "${1:-build}"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages ${missing[*]}; run as root (or: sudo $0 $*)" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
stamp=/var/lib/apt/periodic/skillrun-update-stamp
# A package of a foreign architecture (libseccomp-dev:arm64) needs that
# architecture in dpkg, and package lists fetched after it was added.
for p in "${missing[@]}"; do
	case $p in
	*:*)
		arch=${p##*:}
		if [ "$arch" != "$(dpkg --print-architecture)" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
			echo "install-deps: adding the $arch architecture to dpkg (multiarch) for $p" >&2
			dpkg --add-architecture "$arch"
			rm -f "$stamp"
		fi
		;;
	esac
done
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ]; then
	apt-get update -qq >&2
	mkdir -p "$(dirname "$stamp")" && touch "$stamp"
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
go_tools "${1:-build}"
