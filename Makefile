# gridcity — build, run, test.
SHELL := /bin/bash
export PATH := $(shell go env GOPATH)/bin:$(PATH)
GO ?= go
BIN := bin
MODULES := proto lib agent coordinator
# Test-only modules: each is built by an end-to-end test alone and is not in
# go.work, so that no product module (or workspace build) depends on it.
TEST_MODULES := coordinator/e2e/mcpgoclient coordinator/e2e/pebble
PROTOC_GEN_GO := v1.36.12
PROTOC_GEN_GO_GRPC := v1.6.0

.PHONY: all build package run run-ha test unit e2e bench proto proto-check tidy-check vet fmt-check deps-check large-files-check clean \
	demo demo-break demo-fix demo-status demo-down demo-build

all: build

# Static binaries without gRPC's tracing (and the template packages it pulls
# in): the agent's resident memory follows the size of its binary.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BUILDFLAGS := -trimpath -tags grpcnotrace -ldflags "-s -w -X main.version=$(VERSION)"
# The agent's dependencies and the standard library are compiled without
# inlining: 0.8 MB less binary, and so resident memory, for a process that
# works a few milliseconds every 5 s. Its own code and the runtime keep it.
AGENT_BUILDFLAGS := $(BUILDFLAGS) -gcflags=all=-l -gcflags=runtime= -gcflags=github.com/gridcity/gridcity/...=

# Each binary is built in its own module with GOWORK=off, so that it links exactly the versions
# its go.mod selects; in the workspace, a dependency would come at the highest version any
# module of go.work asks for (deps-check compares).
build:
	@mkdir -p $(BIN)
	cd coordinator && CGO_ENABLED=0 GOWORK=off $(GO) build $(BUILDFLAGS) -o $(abspath $(BIN))/gridcity ./cmd/gridcity
	cd agent && CGO_ENABLED=0 GOWORK=off $(GO) build $(AGENT_BUILDFLAGS) -o $(abspath $(BIN))/gridcity-agent ./cmd/gridcity-agent

# package: dist/gridcity_VERSION_ARCH.deb, dist/gridcity-agent_VERSION_ARCH.deb and the .rpm
# files (gridcity-VERSION-1.x86_64.rpm, …) for amd64 and arm64, with nfpm at a pinned version
# (deploy/package/build.sh). VERSION=… sets the version (default: from git, 0~gitDATE.HASH
# before the first tag), ARCHS="amd64" fewer architectures.
package:
	@deploy/package/build.sh --out dist $(if $(filter command line environment,$(origin VERSION)),--version "$(VERSION)") $(if $(ARCHS),--arch "$(ARCHS)")

# run: a coordinator on its embedded store plus an agent for this machine. CONFIG=FILE starts
# the coordinator with that config (districts, resources, links, runbooks; see docs/configuration.md).
run:
	@echo "make run: building bin/gridcity and bin/gridcity-agent (the first build downloads modules and takes a few minutes)…"
	@$(MAKE) --no-print-directory build
	@scripts/run-local.sh $(if $(CONFIG),--config "$(CONFIG)")

# run-ha: three coordinators on a PostgreSQL of their own (Debian's postgresql package, a
# cluster in .run/ha/pg) and an agent for this machine; prints each replica's MCP endpoint and
# app. Ctrl-C stops the agent, the coordinators and PostgreSQL.
run-ha:
	@echo "make run-ha: building bin/gridcity and bin/gridcity-agent…"
	@$(MAKE) --no-print-directory build
	@scripts/run-ha.sh

# demo: a small city of real hosts on this machine (network namespaces, so root): a load
# balancer, two web servers, an API, PostgreSQL and a scraper, each with its agent, and a
# coordinator for an AI client. demo-break stops the database, demo-fix starts it again,
# demo-status shows it, demo-down (or Ctrl-C on make demo) tears it all down. INSTALL=1 lets
# make demo install missing Debian packages; DEMO_HTTP=ADDR moves the MCP endpoint and the app.
DEMO_FLAGS = $(if $(INSTALL),--install) $(if $(DEMO_HTTP),--http $(DEMO_HTTP))

demo:
	@scripts/demo.sh up $(DEMO_FLAGS)

demo-break demo-fix demo-status demo-down:
	@scripts/demo.sh $(@:demo-%=%)

demo-build: build
	cd coordinator && CGO_ENABLED=0 GOWORK=off $(GO) build $(BUILDFLAGS) -o $(abspath $(BIN))/gridcity-fleet ./harness/cmd/gridcity-fleet

# test: every check and every test; CI calls this.
test: proto-check tidy-check vet fmt-check deps-check large-files-check unit e2e

# deps-check: each binary of make build links every module at the version its own module's
# build list names (GOWORK=off go list -m all in that module), and says so in its build info.
deps-check: build
	@scripts/deps-check.sh $(BIN)/gridcity=coordinator $(BIN)/gridcity-agent=agent

# large-files-check: no tracked file over 1 MiB but those its allow-list names, with why.
large-files-check:
	@scripts/large-files-check.sh

# unit: every package but the end-to-end suite.
unit:
	$(GO) test -race -count=1 $$($(GO) list ./proto/... ./lib/... ./agent/... ./coordinator/... | grep -v /e2e)

e2e: build
	@scripts/e2e.sh

bench: build
	@scripts/bench.sh

proto-tools:
	@command -v protoc >/dev/null || { echo "protoc is missing: apt-get install protobuf-compiler"; exit 1; }
	@$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO)
	@$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC)

proto: proto-tools
	cd proto && protoc -I . --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative gridcity/v1/*.proto

# proto-check regenerates into a temporary tree and fails when the committed code drifted.
# Without protoc (a machine with only Go) it says so and skips, except in CI.
proto-check:
	@if ! command -v protoc >/dev/null; then \
		if [ -n "$$CI" ]; then echo "protoc is missing: apt-get install protobuf-compiler"; exit 1; fi; \
		echo "proto-check SKIPPED: protoc is not installed (apt-get install protobuf-compiler); CI runs it"; exit 0; fi; \
	$(MAKE) --no-print-directory proto-tools && $(MAKE) --no-print-directory proto-diff

proto-diff:
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; cp -r proto/gridcity $$tmp/; \
	(cd $$tmp && protoc -I . --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative gridcity/v1/*.proto) && \
	diff -r proto/gridcity $$tmp/gridcity || { echo "generated protobuf code drifted: run make proto and commit"; exit 1; }

tidy-check:
	@for m in $(MODULES) $(TEST_MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "module $$m is not tidy: cd $$m && GOWORK=off go mod tidy"; exit 1; }; done

vet:
	$(GO) vet ./proto/... ./lib/... ./agent/... ./coordinator/...
	@for m in $(TEST_MODULES); do (cd $$m && GOWORK=off $(GO) vet ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l proto lib agent coordinator); [ -z "$$out" ] || { echo "gofmt needed: $$out"; exit 1; }

clean:
	rm -rf $(BIN) .run dist
