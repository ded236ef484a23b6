#!/usr/bin/env bash
# Packs the release tarballs of make dist: for each architecture a folder
# skillrun-VERSION-linux-ARCH with bin/skillrun (the OCI runtime),
# bin/skillrun-skills (the skills runner) and bin/skillrun-openshell (the
# OpenShell driver): BINARY, and BINARY with -skills or -openshell inserted
# after skillrun,
# share/man/man8/skillrun.8,
# the bash and zsh completions and README.md, as dist/*.tar.gz, and their
# sha256 sums in dist/SHA256SUMS (hack/install.sh checks them).
#
#   hack/dist.sh VERSION AMD64_BINARY ARM64_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1 amd64=$2 arm64=$3
rm -rf dist && mkdir -p dist
for arch in amd64 arm64; do
	bin=$amd64
	[ "$arch" = arm64 ] && bin=$arm64
	name=skillrun-$version-linux-$arch
	d=dist/$name
	install -D -m 0755 "$bin" "$d/bin/skillrun"
	install -D -m 0755 "${bin/skillrun/skillrun-skills}" "$d/bin/skillrun-skills"
	install -D -m 0755 "${bin/skillrun/skillrun-openshell}" "$d/bin/skillrun-openshell"
	install -D -m 0644 bin/man/skillrun.8 "$d/share/man/man8/skillrun.8"
	install -D -m 0644 bin/completion/skillrun.bash "$d/share/bash-completion/completions/skillrun"
	install -D -m 0644 bin/completion/_skillrun "$d/share/zsh/site-functions/_skillrun"
	install -D -m 0644 README.md "$d/README.md"
	tar -C dist --owner=0 --group=0 --numeric-owner -czf "dist/$name.tar.gz" "$name"
	rm -rf "$d"
done
(cd dist && sha256sum -- *.tar.gz >SHA256SUMS)
ls -l dist
