# Rota's build. Every tool is pinned here and installed into bin/tools by the
# target that needs it; nothing is assumed to be on the machine but Go and gcc.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := build

GO ?= go
TOOLS := $(CURDIR)/bin/tools
export PATH := $(TOOLS):$(PATH)
# go-nvml needs cgo; its headers warn about deprecated declarations by the thousand.
export CGO_ENABLED := 1
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
# Every go command of the build (binaries, tests, tools, kubectl, helm) runs
# with -trimpath: the build cache keys packages by it, so one setting lets
# make test reuse what make build compiled instead of compiling Kubernetes a
# second time (and the binaries carry no path of the machine that built them).
export GOFLAGS := -trimpath $(GOFLAGS)

# Every Go program the build runs is pinned by a `tool` line, so that `go mod
# tidy` keeps its sums and it builds from the checked-in go.sum alone:
# kubectl, etcd and helm in go.mod (they build from the Kubernetes and Helm
# modules Rota already depends on, and share the test build's cache),
# controller-gen, golangci-lint and gotestsum each in a module of its own under
# hack/tools/<name> (their dependencies must not move Rota's). Moving one:
# cd hack/tools/<name> && go get -tool <package>@<version> && go mod tidy.
K8S_VERSION := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null)

# Evaluated once (not at every use), so every binary and image of one make
# run carries the same version and build time.
ifndef VERSION
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
endif
ifndef GIT_COMMIT
GIT_COMMIT := $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
endif
# The build date is the commit's (SOURCE_DATE_EPOCH's when set), not the
# clock's: one commit builds the same binaries and images every time, and a
# second make run finds bin/ up to date instead of linking every binary again
# for a new -X value (make test, make images and make chaos each build).
ifndef BUILD_DATE
BUILD_DATE := $(shell if [ -n "$$SOURCE_DATE_EPOCH" ]; then date -u -d "@$$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ; \
	else TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ; fi)
endif
# kube-scheduler's --version prints component-base's version: say which
# Kubernetes release it is built on and which Rota build it is.
LDFLAGS := -X github.com/rota-dev/rota/pkg/version.version=$(VERSION) \
	-X github.com/rota-dev/rota/pkg/version.gitCommit=$(GIT_COMMIT) \
	-X github.com/rota-dev/rota/pkg/version.buildDate=$(BUILD_DATE) \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION)+rota.$(subst -,.,$(VERSION)) \
	-X k8s.io/component-base/version.gitCommit=$(GIT_COMMIT) \
	-X k8s.io/component-base/version.gitTreeState=$(if $(findstring dirty,$(VERSION)),dirty,clean) \
	-X k8s.io/component-base/version.buildDate=$(BUILD_DATE)

BINARIES := $(notdir $(wildcard cmd/*))
# Built with CGO_ENABLED=0: static, so that the scheduler's image needs
# nothing but the binary (make images), and kubectl-rota runs on any Linux.
# The driver, the sandbox and the schedule controller (its `forecast` builds
# node profiles on go-nvml's mocks) link go-nvml, which needs cgo.
STATIC_BINARIES := scheduler kubectl-rota
# Tests that start a control plane share the machine's two cores badly.
TEST_PARALLEL ?= 2
TEST_TIMEOUT ?= 25m

CGO_BINARIES := $(filter-out $(STATIC_BINARIES),$(BINARIES))

# One go build per cgo setting rather than one per binary: the go command
# then compiles and links the binaries side by side on every core.
.PHONY: build
build: ## Build every binary under cmd/ into bin/.
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(CGO_BINARIES))
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ $(addprefix ./cmd/,$(STATIC_BINARIES))

# PROGRESS=1 prints a line every few hundred packages compiled instead of
# nothing (hack/build-progress.sh); make demo sets it.
PROGRESS ?=
progress = $(if $(PROGRESS),-v,)
progress_pipe = $(if $(PROGRESS),2>&1 | hack/build-progress.sh $@,)

$(addprefix bin/,$(BINARIES)): bin/%: FORCE
	$(if $(filter $*,$(STATIC_BINARIES)),CGO_ENABLED=0 )$(GO) build $(progress) -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/$* $(progress_pipe)

.PHONY: FORCE
FORCE:

# make test runs every package once: under the race detector unless its
# tests start a kube-apiserver in-process (hack/test-packages.sh says which
# and why). The race half is make test-race, a prerequisite of make test.
RACE_PKGS = $$(hack/test-packages.sh race)
PLAIN_PKGS = $$(hack/test-packages.sh plain)
GOTESTSUM = ROTA_BIN_DIR=$(CURDIR)/bin gotestsum --format pkgname-and-test-fails --
.PHONY: test
test: build $(TOOLS)/gotestsum test-race ## Every package once: under the race detector unless it starts a kube-apiserver.
	$(GOTESTSUM) -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(PLAIN_PKGS)

.PHONY: test-race
test-race: build $(TOOLS)/gotestsum ## The packages that start no kube-apiserver, under the race detector (part of make test).
	$(GOTESTSUM) -race -p $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

.PHONY: test-unit
test-unit: ## Tests that start no kube-apiserver, without the race detector.
	$(GO) test $(RACE_PKGS)

# One real node on this machine (docs/e2e-node.md): containerd, runc, the
# CNI bridge plugin and the kubelet, each built from its Go module at the
# version its go.mod pins (hack/tools/runc, hack/tools/containerd,
# hack/tools/cni; the kubelet is a tool of go.mod), Rota installed from its
# Helm chart with make images' images, then test/e2enode's scenarios. As
# root; it leaves nothing running or mounted.
E2E_NODE_TOOLS := $(TOOLS)/runc $(TOOLS)/containerd $(TOOLS)/kubelet $(TOOLS)/cni/bridge $(TOOLS)/helm
E2E_NODE_TIMEOUT ?= 20m
E2E_NODE_FLAGS ?=
.PHONY: e2e-node
e2e-node: images bin/kubectl-rota $(E2E_NODE_TOOLS) bin/e2e-workload ## Rota from its Helm chart on a real kubelet, containerd and runc (root; docs/e2e-node.md).
	ROTA_E2E_NODE=1 ROTA_BIN_DIR=$(CURDIR)/bin $(GO) test -ldflags '$(LDFLAGS)' -count=1 -v -timeout $(E2E_NODE_TIMEOUT) $(E2E_NODE_FLAGS) ./test/e2enode/

# runc needs libseccomp (cgo, -tags seccomp): containerd gives every pod a
# seccomp profile, which runc without it refuses.
$(TOOLS)/runc: hack/tools/runc/go.mod hack/tools/runc/go.sum
	GOBIN=$(TOOLS) CGO_ENABLED=1 $(GO) -C hack/tools/runc install -tags seccomp tool
$(TOOLS)/containerd: hack/tools/containerd/go.mod hack/tools/containerd/go.sum
	GOBIN=$(TOOLS) CGO_ENABLED=0 $(GO) -C hack/tools/containerd install tool
$(TOOLS)/cni/bridge: hack/tools/cni/go.mod hack/tools/cni/go.sum
	GOBIN=$(TOOLS)/cni CGO_ENABLED=0 $(GO) -C hack/tools/cni install tool
$(TOOLS)/kubelet: go.mod go.sum
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kubelet
# Static: it is also the pod sandbox ("pause") image's binary.
bin/e2e-workload: FORCE
	CGO_ENABLED=0 $(GO) build -o $@ ./test/e2enode/workload

# Container images (hack/release, go-containerregistry; no Docker): one per
# binary that runs in the cluster, tagged $(VERSION), written to
# bin/images/<name>/ (OCI layout) and bin/images/<name>.tar (docker-archive).
# Their base layer is the Debian packages of hack/release/base-packages.lock,
# downloaded with apt-get download into $(DEB_CACHE) and checked against the
# lock's sha256. hack/release's TestImages (in make test) builds, loads and
# runs them.
IMAGE_REGISTRY ?= ghcr.io/rota-dev
IMAGES_DIR ?= $(CURDIR)/bin/images
DEB_CACHE ?= $(CURDIR)/bin/debs
# The SPDX licence expression of the image label; the repository has no
# LICENSE file yet.
IMAGE_LICENSES ?= NOASSERTION
.PHONY: images
images: bin/scheduler bin/schedule-controller bin/dra-kubelet-plugin ## One OCI image per cluster binary in bin/images (VERSION, IMAGE_REGISTRY).
	$(GO) run ./hack/release images --bin-dir bin --out $(IMAGES_DIR) --registry $(IMAGE_REGISTRY) \
		--version $(VERSION) --revision $(GIT_COMMIT) --created $(BUILD_DATE) --licenses '$(IMAGE_LICENSES)' \
		--lock hack/release/base-packages.lock --deb-cache $(DEB_CACHE)

# Re-pin the base layers' Debian packages at apt's candidate versions (after
# apt-get update), or at the ones named: make base-lock
# BASE_PACKAGES='libc6:amd64=2.36-9+deb12u14 ca-certificates=20230311+deb12u1'.
BASE_PACKAGES ?=
.PHONY: base-lock
base-lock: ## Pin the images' base Debian packages (hack/release/base-packages.lock) at apt's candidates, or BASE_PACKAGES.
	$(GO) run ./hack/release lock --lock hack/release/base-packages.lock --deb-cache $(DEB_CACHE) $(BASE_PACKAGES)

.PHONY: push
push: ## Push the images of `make images` to REGISTRY: make images push REGISTRY=registry.example.com/rota
	@test -n "$(REGISTRY)" || { echo "set REGISTRY, e.g. make push REGISTRY=registry.example.com/rota" >&2; exit 1; }
	$(GO) run ./hack/release push --dir $(IMAGES_DIR) --registry $(REGISTRY)

# The kustomize install (manifests/) as one file for one version:
# bin/release/rota.yaml with every image at
# $(REGISTRY)/<name>:$(VERSION)@<digest of the image `make images` built>,
# and each image's CycloneDX SBOM beside it (bin/release/<name>.cdx.json).
.PHONY: release-manifests
release-manifests: images ## Render bin/release/rota.yaml, images pinned by digest, and an SBOM per image: make release-manifests VERSION=v0.1.0 [REGISTRY=...]
	$(GO) run ./hack/release manifests --manifests manifests --version $(VERSION) \
		--registry $(or $(REGISTRY),$(IMAGE_REGISTRY)) --images $(IMAGES_DIR) --out bin/release/rota.yaml

# kubectl for the sandbox, built from the Kubernetes module Rota already
# depends on (a tool of go.mod).
bin/kubectl: go.mod go.sum
	$(GO) build $(progress) -o $@ k8s.io/kubernetes/cmd/kubectl $(progress_pipe)

# The local sandbox (cmd/rota-sandbox): the fallback and the week-swap
# scenarios on a virtual clock, each with its report and HTML timeline
# (hack/demo.sh says what it does, shows progress and sums up). It builds
# bin/rota-sandbox as `make build` does (-trimpath), the binary that
# test/integration/sandbox runs as a process.
DEMO_DIR ?= $(CURDIR)/bin/demo
.PHONY: demo
demo: ## Play the fallback and week-swap scenarios in the local sandbox.
	@MAKE="$(MAKE)" DEMO_DIR=$(DEMO_DIR) hack/demo.sh

# The chaos run (docs/reliability.md, "Chaos"): the scheduler, the schedule
# controller and one driver per node run as processes from bin/, a seeded
# injector SIGKILLs them while a workload plays, and Rota's invariants are
# checked all along. CHAOS_SEED replays a run; exit 1 on any violation.
CHAOS_SEED ?= 1
CHAOS_KILLS ?= 50
CHAOS_DIR ?= $(CURDIR)/bin/chaos
# More rota-sandbox chaos flags, e.g. --min-gap 200ms --max-gap 1200ms.
CHAOS_FLAGS ?=
.PHONY: chaos
chaos: build ## Kill real component processes at random (CHAOS_SEED, CHAOS_KILLS) and check the invariants.
	bin/rota-sandbox chaos --seed $(CHAOS_SEED) --kills $(CHAOS_KILLS) --bin-dir $(CURDIR)/bin \
		--dir $(CHAOS_DIR) --report $(CHAOS_DIR)/report.json $(CHAOS_FLAGS)

bin/etcd: go.mod go.sum
	$(GO) build -o $@ go.etcd.io/etcd/server/v3

# Upstream's scheduler_perf with the stock and the Rota profile, alternating
# (test/bench/scheduler); prints, per workload, the median and range of
# each profile's throughput and CPU per pod, its peak RSS, the ratios, the
# share of pods on the best feasible tier and on each tier, and issue #39's
# goals met or missed.
# BENCH_LABELS picks workloads by label: performance (default: the 500-node
# runs), scale (MixedGPUs 40 to 2,000 nodes, BusyH100 40 and 500;
# bench-scheduler-scale), small (40 nodes), smoke (CI's: the four families
# at 120 nodes), large (1,000 and 2,000), huge
# (5,000 nodes), busy (BusyH100), issue39 (1,000 and 5,000 nodes of
# MixedGPUs, BusyH100, Fallback, MixedReservations; bench-scheduler-ahead);
# "a,b" needs both, "-a" excludes. BENCH_FLAGS passes more flags
# to the test binary, e.g. -perf-cpuprofile (one CPU profile per workload,
# written beside the data items in bin/bench-scheduler) or
# -rota-bench-requests-at=N (kube-apiserver's writes and watch events at
# each workload's Nth measured bind; the summary lists those that differ
# between the profiles).
BENCH_COUNT ?= 3
BENCH_LABELS ?= performance
# Narrow to some test cases, e.g. BENCH=BenchmarkPerfScheduling/MixedGPUs.
BENCH ?= BenchmarkPerfScheduling
BENCH_FLAGS ?=
BENCH_CERTS := $(CURDIR)/bin/bench-scheduler/apiserver-certs
.PHONY: bench-scheduler
bench-scheduler: bin/etcd ## Scheduler throughput and CPU per pod: stock vs Rota profile (scheduler_perf).
	mkdir -p bin/bench-scheduler
	$(GO) test -tags benchscheduler -c -o bin/bench-scheduler/scheduler.test ./test/bench/scheduler
	@# One repetition at a time, so stock and Rota runs alternate and a change
	@# in machine load does not favour whichever profile happens to run later;
	@# each profile in a process of its own (its test cases' label), first
	@# stock, then Rota in odd repetitions, the other way round in even ones,
	@# so neither always inherits the other's leftover heap and goroutines.
	@# Built with -trimpath (GOFLAGS), kube-apiserver's test server finds no
	@# absolute path to its own source, and looks for its certificate
	@# fixtures under TEST_SRCDIR/TEST_WORKSPACE instead: give it a directory.
	mkdir -p $(BENCH_CERTS)/ws/k8s.io/kubernetes@$(K8S_VERSION)/cmd/kube-apiserver/app/testing/testdata
	: > bin/bench-scheduler.out
	uptime | tee -a bin/bench-scheduler.out
	cd test/bench/scheduler && for i in $$(seq $(BENCH_COUNT)); do \
		order="stock rota"; [ $$((i % 2)) = 1 ] || order="rota stock"; \
		for profile in $$order; do \
		TEST_SRCDIR=$(BENCH_CERTS) TEST_WORKSPACE=ws \
		PATH=$(CURDIR)/bin:$$PATH $(CURDIR)/bin/bench-scheduler/scheduler.test -test.run '^$$' \
			-test.bench '$(BENCH)' -test.benchtime 1x -test.count 1 -test.timeout 120m \
			-perf-scheduling-label-filter=$(BENCH_LABELS),$$profile -data-items-dir=$(CURDIR)/bin/bench-scheduler \
			$(BENCH_FLAGS) 2>&1 | tee -a $(CURDIR)/bin/bench-scheduler.out || exit 1; \
		done; \
	done
	uptime | tee -a bin/bench-scheduler.out
	$(GO) run ./test/bench/scheduler/summary < bin/bench-scheduler.out

# MixedGPUs at 40, 500, 1,000 and 2,000 nodes and BusyH100 at 40 and 500,
# stock and Rota alternating (5,000 nodes: BENCH_LABELS=huge).
.PHONY: bench-scheduler-scale
bench-scheduler-scale: ## Scheduler stock vs Rota from 40 to 2,000 nodes x 8 GPUs, and with busy H100 nodes.
	$(MAKE) --no-print-directory bench-scheduler BENCH_LABELS=scale BENCH='BenchmarkPerfScheduling/(MixedGPUs|BusyH100)'

# Issue #39's comparison: the four workloads its goals are set on (best
# tier free, BusyH100, Fallback, MixedReservations) at 1,000 and 5,000
# nodes x 8 GPUs, stock and Rota interleaved AHEAD_COUNT times each in one
# invocation. AHEAD_LABELS=issue39,large keeps to 1,000 nodes,
# issue39,huge to 5,000; AHEAD_BENCH narrows the families, e.g.
# AHEAD_BENCH='BenchmarkPerfScheduling/(MixedGPUs|BusyH100)'.
AHEAD_COUNT ?= 5
AHEAD_LABELS ?= issue39
AHEAD_BENCH ?= BenchmarkPerfScheduling/(MixedGPUs|BusyH100|Fallback|MixedReservations)
.PHONY: bench-scheduler-ahead
bench-scheduler-ahead: ## Scheduler stock vs Rota on issue #39's four workloads at 1,000 and 5,000 nodes, 5 runs each.
	$(MAKE) --no-print-directory bench-scheduler BENCH_COUNT=$(AHEAD_COUNT) BENCH_LABELS=$(AHEAD_LABELS) \
		BENCH='$(AHEAD_BENCH)'

# Every fuzz target for FUZZTIME each, one after the other (hack/fuzz.sh);
# FUZZ_KEEP=1 keeps the inputs found interesting under testdata/fuzz.
FUZZTIME ?= 30s
FUZZ_KEEP ?= 0
.PHONY: fuzz
fuzz: ## Run every fuzzer for FUZZTIME each (FUZZ=FuzzX for one; FUZZ_KEEP=1 keeps new inputs).
	FUZZTIME=$(FUZZTIME) FUZZ_KEEP=$(FUZZ_KEEP) FUZZ=$(FUZZ) hack/fuzz.sh

.PHONY: generate
generate: $(TOOLS)/controller-gen ## Regenerate deepcopy code and CRDs.
	controller-gen object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:artifacts:config=manifests/crds
	$(MAKE) --no-print-directory chart-crds

# The Helm chart ships the generated CRDs as they are (Helm installs crds/
# before the templates); verify-generate fails when they drift.
.PHONY: chart-crds
chart-crds: ## Copy the generated CRDs into charts/rota/crds.
	rm -f charts/rota/crds/*.yaml
	cp manifests/crds/rota.dev_*.yaml charts/rota/crds/

GENERATED := pkg/apis manifests/crds charts/rota/crds
.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed.
	@if ! git diff --quiet -- $(GENERATED) || [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		git status --short -- $(GENERATED); git diff -- $(GENERATED) | head -50; \
		echo "generated files are stale: run 'make generate' and commit the result" >&2; exit 1; fi

# helm lint --strict on the chart with its defaults and with every value set
# (charts/rota/ci/all-values.yaml). .ci/run runs it after make test, whose
# build cache already holds most of the helm CLI's packages (go.mod's Helm
# and Kubernetes modules); test/integration/install (TestChartLint) lints the
# chart through Helm's library too, with warnings as failures.
.PHONY: chart-lint
chart-lint: $(TOOLS)/helm ## helm lint the chart (defaults and every value set).
	helm lint --strict --kube-version $(patsubst v%,%,$(K8S_VERSION)) charts/rota
	helm lint --strict --kube-version $(patsubst v%,%,$(K8S_VERSION)) -f charts/rota/ci/all-values.yaml charts/rota

.PHONY: lint
# No separate `go vet ./...`: golangci-lint's govet runs the analyzers go vet
# runs by default (.golangci.yml), and each of the two would otherwise
# type-check and compute facts for all of Kubernetes on its own.
lint: $(TOOLS)/golangci-lint ## gofmt, the package map, README vs CI, and golangci-lint (go vet's analyzers among its linters).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run ./hack/layering
	$(GO) run ./hack/readmecheck
	golangci-lint run ./...

.PHONY: update-k8s
update-k8s: ## Move to another Kubernetes release: make update-k8s K8S=v1.37.3
	hack/update-k8s-replaces.sh $(K8S)
	$(GO) mod tidy

# The tools of hack/tools/<name>/go.mod ("tool" installs every tool line).
$(TOOLS)/controller-gen $(TOOLS)/golangci-lint $(TOOLS)/gotestsum: $(TOOLS)/%: hack/tools/%/go.mod hack/tools/%/go.sum
	GOBIN=$(TOOLS) CGO_ENABLED=0 $(GO) -C hack/tools/$* install tool
# The helm CLI is the release of the Helm library the chart tests render with
# (a tool of go.mod), built with the test build's settings (cgo on) to share
# its cache.
$(TOOLS)/helm: go.mod go.sum
	$(GO) build -o $@ helm.sh/helm/v4/cmd/helm

.PHONY: clean
clean:
	rm -rf bin

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
