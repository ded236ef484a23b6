# skillrun: a runc-compatible OCI runtime and sandboxed runner for AI agent skills.
SHELL := /bin/bash
GO ?= go
# Three binaries from cmd/skillrun, installed side by side (see
# cmd/skillrun/companion.go). Every runc verb a shim calls and every
# container's init pay their binary's package initialisation
# (docs/performance.md), so the OCI runtime links only what it uses:
# skillrun: the OCI runtime (runtimeonly tag: no skill model, MCP SDK or
# egress server); its skill, sandbox and mcp commands exec skillrun-skills.
BIN := bin/skillrun
# skillrun-skills: the whole program (the skills runner, the MCP server, the
# network allowlist's egress server).
BIN_SKILLS := bin/skillrun-skills
# skillrun-openshell: the whole program and the OpenShell compute driver
# (gRPC, protobuf, the OCI image stack), which skillrun openshell-driver
# execs.
BIN_OPENSHELL := bin/skillrun-openshell
PKG := github.com/skillrun/skillrun
VERSION ?= $(shell cat VERSION 2>/dev/null || echo 0.1.0-dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)
# Static, with seccomp: libseccomp.a linked in; pure-Go user/DNS lookups so
# glibc's NSS is never dlopen'ed from a static binary.
TAGS := seccomp osusergo netgo urfave_cli_no_docs
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.gitCommit=$(COMMIT) -extldflags "-static"
# linux/arm64, cross-compiled as the amd64 build is made: static, seccomp
# compiled in (the skill spec always has a seccomp filter, which
# libcontainer without seccomp refuses). cgo with the aarch64 cross
# compiler; pkg-config reads only arm64's .pc files, so libseccomp.a for
# arm64 (Debian multiarch: libseccomp-dev:arm64, hack/install-deps.sh
# cross) is what gets linked.
ARM64_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc \
	PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
GOFLAGS_BUILD := -trimpath -buildvcs=false
# encoding/json backed by the Go team's v2 implementation (Go 1.25+): the
# same encoding, half the cold-start decode cost. Every run decodes
# config.json, libcontainer's init config and state.json once, cold.
# Unit tests build the same way (hack/test.sh).
export GOEXPERIMENT := jsonv2

.PHONY: all skillrun static lcfloor test unit integration lint cross bench conformance security-report fuzz demo install clean help deps proto proto-check man dist

all: skillrun ## build bin/skillrun, bin/skillrun-skills and bin/skillrun-openshell (static, seccomp compiled in)

skillrun: static ## same as static

static: deps ## build the static binaries bin/skillrun (the OCI runtime), bin/skillrun-skills (the skills runner) and bin/skillrun-openshell (the OpenShell driver)
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS) runtimeonly" -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/skillrun
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS)" -ldflags '$(LDFLAGS)' -o $(BIN_SKILLS) ./cmd/skillrun
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS) openshell" -ldflags '$(LDFLAGS)' -o $(BIN_OPENSHELL) ./cmd/skillrun
	@for b in $(BIN) $(BIN_SKILLS) $(BIN_OPENSHELL); do file $$b | grep -q 'statically linked' || { echo "$$b is not static" >&2; exit 1; }; done

deps:
	@hack/install-deps.sh build

test: static ## run every test: unit, integration (root and rootless), clients, skills
	hack/test.sh

unit: ## unit tests only (cmd/skillrun also with the runtimeonly and openshell tags)
	$(GO) test -tags "$(TAGS)" ./...
	$(GO) test -tags "$(TAGS) runtimeonly" ./cmd/skillrun
	$(GO) test -tags "$(TAGS) openshell" ./cmd/skillrun

integration: static ## black-box tests of bin/skillrun (RUNTIME=runc to prove them against runc)
	hack/test.sh integration

lint: deps ## gofmt, go vet (linux and darwin)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags "$(TAGS)" ./...
	$(GO) vet -tags "$(TAGS) runtimeonly" ./cmd/skillrun
	$(GO) vet -tags "$(TAGS) openshell" ./cmd/skillrun
	$(GO) vet -tags integration ./tests/...
	cd hack/clients/crirun && $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet -tags openshell ./cmd/skillrun

cross: ## build darwin/amd64, darwin/arm64 and linux/arm64 (static, seccomp); vet darwin and compile its tests
	@hack/install-deps.sh cross
	GOOS=darwin GOARCH=amd64 CGO_ENABLED=0 $(GO) build -o bin/skillrun-darwin-amd64 ./cmd/skillrun
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o bin/skillrun-darwin-arm64 ./cmd/skillrun
	# libcontainer needs cgo (nsenter); linked with libseccomp for arm64.
	$(ARM64_ENV) $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS) runtimeonly" -ldflags '$(LDFLAGS)' -o bin/skillrun-linux-arm64 ./cmd/skillrun
	@file bin/skillrun-linux-arm64 | grep -q 'ARM aarch64.*statically linked' || { echo "bin/skillrun-linux-arm64 is not a static arm64 binary" >&2; exit 1; }
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	for p in ./runtime/darwin ./runtime ./seatbelt ./spec ./runner ./cmd/skillrun; do \
		GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o /dev/null $$p || exit 1; done

bench: static lcfloor ## compare skillrun with runc, crun, bwrap, bare python3 and libcontainer's floor
	hack/bench.sh

lcfloor: deps ## build bin/lcfloor: the least a libcontainer caller can do (a benchmark peer)
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS)" -ldflags '-s -w -extldflags "-static"' -o bin/lcfloor ./hack/lcfloor

conformance: static ## OCI runtime-tools validation suite against skillrun and runc
	hack/conformance.sh

security-report: static ## containment probes as root and rootless; regenerates docs/security.md's results table
	SKILLRUN=$(CURDIR)/$(BIN) hack/security-report.sh

fuzz: ## long fuzz run of every target (FUZZTIME=2m each; make test runs them 10s each)
	FUZZTIME=$${FUZZTIME:-2m} hack/fuzz.sh

demo: static ## the main job: run the example skills sandboxed (as root: also rootless, as skillrun-test)
	@hack/install-deps.sh demo
	@if [ "$$(id -u)" -eq 0 ]; then hack/ensure-test-user.sh >/dev/null; fi
	hack/demo.sh $(BIN)

install: static ## install to /usr/local/bin
	install -m 0755 $(BIN) /usr/local/bin/skillrun
	install -m 0755 $(BIN_SKILLS) /usr/local/bin/skillrun-skills
	install -m 0755 $(BIN_OPENSHELL) /usr/local/bin/skillrun-openshell

man: deps ## bin/man/skillrun.8 and bin/completion/{skillrun.bash,_skillrun}, from the verbs' own help
	CGO_ENABLED=1 $(GO) build $(GOFLAGS_BUILD) -tags "seccomp osusergo netgo gendocs openshell" -o bin/skillrun-docs ./cmd/skillrun
	@mkdir -p bin/man bin/completion
	bin/skillrun-docs __gendocs man >bin/man/skillrun.8
	bin/skillrun-docs __gendocs bash >bin/completion/skillrun.bash
	bin/skillrun-docs __gendocs zsh >bin/completion/_skillrun

dist: static man ## dist/skillrun-VERSION-linux-{amd64,arm64}.tar.gz + SHA256SUMS: static binaries, man page, completions (install: hack/install.sh)
	@hack/install-deps.sh cross
	$(ARM64_ENV) $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS) runtimeonly" -ldflags '$(LDFLAGS)' -o bin/skillrun-linux-arm64 ./cmd/skillrun
	$(ARM64_ENV) $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS)" -ldflags '$(LDFLAGS)' -o bin/skillrun-skills-linux-arm64 ./cmd/skillrun
	$(ARM64_ENV) $(GO) build $(GOFLAGS_BUILD) -tags "$(TAGS) openshell" -ldflags '$(LDFLAGS)' -o bin/skillrun-openshell-linux-arm64 ./cmd/skillrun
	@for b in bin/skillrun-linux-arm64 bin/skillrun-skills-linux-arm64 bin/skillrun-openshell-linux-arm64; do file $$b | grep -q 'ARM aarch64.*statically linked' || { echo "$$b is not a static arm64 binary" >&2; exit 1; }; done
	hack/dist.sh $(VERSION) bin/skillrun bin/skillrun-linux-arm64

proto: ## regenerate openshell/computev1 from openshell/proto (protoc; generated code is committed)
	@hack/install-deps.sh proto
	PATH=$(CURDIR)/bin/tools:$$PATH protoc -I openshell/proto -I /usr/include \
		--go_out=openshell/computev1 --go_opt=paths=source_relative \
		--go-grpc_out=openshell/computev1 --go-grpc_opt=paths=source_relative \
		openshell/proto/compute_driver.proto

proto-check: proto ## fail when the committed openshell/computev1 differs from what make proto generates
	@git diff --exit-code --stat -- openshell/computev1 && \
	test -z "$$(git ls-files --others --exclude-standard -- openshell/computev1)" || \
		{ echo "openshell/computev1 is not what make proto generates from openshell/proto: run make proto and commit" >&2; exit 1; }

clean: ## remove build output
	rm -rf bin

help: ## this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
