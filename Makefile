# warmer's build. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# Built tools and the control-plane binaries are cached outside the repo, so
# a fresh clone (and CI) reuses them.
WARMER_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/warmer
export WARMER_CACHE
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(WARMER_CACHE)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN := go tool controller-gen

# -p 4 on a 2-core machine: most test binaries spend their time waiting on
# real processes (kube-apiserver, containerd, a kubelet), and the real-node
# tests take turns on one lock, each holding a slot while it waits. Four at
# once took make test from 896 s to 621 s warm here, with the CPU still
# idle a third of the time.
GO_TEST_FLAGS ?= -race -count=1 -timeout=30m -p 4
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 5s

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Regenerate the CRDs under config/crd/bases (and their copy in the Helm chart).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=config/crd/bases
	cp config/crd/bases/*.yaml charts/warmer/files/crds/

.PHONY: docs
docs: ## Regenerate the reference pages docs/reference/*.md (API, flags, metrics, reasons) from the code.
	go run ./hack/refdocs

.PHONY: fmt
fmt: ## gofmt every Go file.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet every package.
	go vet ./...

.PHONY: verify
# docs runs after manifests: api.md is read from the CRDs manifests writes.
verify: generate manifests docs ## Fail when generated files are stale, code is unformatted or vet complains.
	@if [ -n "$$(git status --porcelain -- api config/crd charts/warmer/files/crds docs/reference)" ]; then \
		echo "generated files are stale; run 'make generate manifests docs' and commit:"; \
		git status --porcelain -- api config/crd charts/warmer/files/crds docs/reference; git diff --stat -- api config/crd charts/warmer/files/crds docs/reference; exit 1; fi
	@if [ -n "$$(gofmt -l $$(git ls-files '*.go'))" ]; then \
		echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; fi
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (built once into the cache).
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT):
	mkdir -p $(WARMER_CACHE)/bin
	GOBIN=$(WARMER_CACHE)/bin/lint-$(GOLANGCI_LINT_VERSION) GOFLAGS= go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(WARMER_CACHE)/bin/lint-$(GOLANGCI_LINT_VERSION)/golangci-lint $@

.PHONY: build
build: ## Build bin/warmer (static, version stamped) and compile every package.
	go build ./...
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/warmer ./cmd/warmer

##@ Testing

.PHONY: testbed
testbed: testbed-sim ## Install containerd, docker-registry, runc, conmon and the CNI plugins (apt); build kube-apiserver, etcd, helm, the kubelet, containerd 2.x and CRI-O (cached).
	hack/install-helm.sh >/dev/null
	hack/install-node-assets.sh >/dev/null
	hack/install-crio.sh >/dev/null

# What the simulated nodes need (the demo, the fleets): no helm, and no real
# node's kubelet or containerd 2.x, which take most of a cold build.
.PHONY: testbed-sim
testbed-sim: ## Install containerd, docker-registry, runc and the CNI plugins (apt); build kube-apiserver and etcd (cached).
	hack/install-testbed-deps.sh
	hack/install-envtest-assets.sh >/dev/null

# The folder install-envtest-assets.sh fills; it prints it as its last line.
ASSETS = $$(hack/install-envtest-assets.sh 2>/dev/null)
# The real node's binaries (test/cluster), from install-node-assets.sh.
NODE_ASSETS = $$(hack/install-node-assets.sh 2>/dev/null)

.PHONY: test
test: testbed ## Run every test: unit, API validation on a real kube-apiserver, the test bed on real containerd and registries, a real node.
	assets="$(ASSETS)"; node="$(NODE_ASSETS)"; KUBEBUILDER_ASSETS="$$assets" WARMER_NODE_ASSETS="$$node" PATH="$$PATH:$$assets" go test $(GO_TEST_FLAGS) ./...

.PHONY: e2e
e2e: testbed-sim ## Run only the end-to-end test: the controller and three agents on real containerd.
	assets="$(ASSETS)"; KUBEBUILDER_ASSETS="$$assets" PATH="$$PATH:$$assets" go test $(GO_TEST_FLAGS) -v ./test/e2e

# BENCH_ROUNDS: rounds of the time-to-warm benchmarks. BENCH_FULL=1: fleets
# of 100, 300, 1,000 and 5,000 simulated agents (and 1,000 with 100 images
# each, and in waves), a failing fleet of 1,000 for 5 minutes, a 10-minute idle
# period (the short form: 100 agents, 100 failing for a minute, 20 s), and
# a Pod's pull beside a warm on the real node (kubelet and containerd 2.x),
# and a pair of 1,000-node fleets with and without the admission policies
# (short form: two pairs of 100). BENCH_SCALE=100,1000x100, BENCH_FAIL=1000,
# BENCH_FAIL_WINDOW=5m, BENCH_POLICY_N=1000, BENCH_POLICY_PAIRS=1 and
# BENCH_IDLE=1m choose those directly. One large image warmed against raw
# CRI: 8 GB (about 25 GB of disk while it runs), BENCH_BIG_GB=N chooses
# (CRI-O: one layer of at most 2 GB). Three large images and a small one through the
# agent's slots: 1 GB each, 2 GB under BENCH_FULL=1. See
# docs/performance.md.
BENCH_ROUNDS ?= 5
BENCH_FULL ?=
BENCH_REAL_NODE := $(if $(filter 1,$(BENCH_FULL)),|BenchmarkRealKubeletBesideWarm|BenchmarkRealNodeRollout)
# The real node's binaries (containerd 2.x for the large image; the
# kubelet under BENCH_FULL=1), which the testbed target has built.
BENCH_NODE_ASSETS := export WARMER_NODE_ASSETS="$(NODE_ASSETS)";

.PHONY: bench
bench: testbed ## Benchmarks (docs/performance.md): time to warm, engine vs CRI, a Pod's pull beside a warm, a simulated fleet (warming, failing), the agent's footprint, hot paths; one summary table.
	assets="$(ASSETS)"; export KUBEBUILDER_ASSETS="$$assets" PATH="$$PATH:$$assets" BENCH_FULL="$(BENCH_FULL)"; $(BENCH_NODE_ASSETS) { \
		go test -p 1 -run '^$$' -bench 'BenchmarkWarm|BenchmarkTimeToWarm|BenchmarkKubeletBesideWarm$(BENCH_REAL_NODE)' -benchtime $(BENCH_ROUNDS)x -timeout 120m ./pkg/pullengine ./test/perf; \
		go test -run '^$$' -bench 'BenchmarkScale|BenchmarkFailingFleet|BenchmarkPolicyCost|BenchmarkAgentFootprint|BenchmarkNodeSignals' -benchtime 1x -timeout 90m ./test/perf; \
		go test -p 1 -run '^$$' -bench 'BenchmarkPresence2000|BenchmarkAggregate1000|BenchmarkDesired1000|BenchmarkImageWarmStatusSize|BenchmarkNodeWarmSize' -benchmem ./pkg/pullengine ./controllers/imagewarm ./controllers/agent/plan; \
		go test -run '^$$' -bench 'BenchmarkStatusFleet' -benchtime 5x ./test/plugin; \
	} 2>&1 | go run ./test/perf/benchtable

.PHONY: fuzz
# The targets are found in the sources: listing them with go test -list
# compiled every package's tests once more, minutes on a cold cache. Any
# target that fails stops the run.
fuzz: ## Run each fuzz target for FUZZTIME (default 5s).
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go); do \
			echo "fuzz $$dir $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$dir || exit 1; \
		done; \
	done

##@ Sandbox

.PHONY: demo
# The sandbox is built with the release build's flags (static, -trimpath),
# as testbed.BuildWarmer builds the agents' binary: the packages both need
# compile once on a cold cache.
demo: testbed-sim ## Bring up the local sandbox (kube-apiserver, a registry, two containerd nodes) and apply config/samples.
	assets="$(ASSETS)"; KUBEBUILDER_ASSETS="$$assets" PATH="$$PATH:$$assets" CGO_ENABLED=0 go run -trimpath ./test/sandbox $(DEMO_FLAGS)

##@ Deployment

# Where releases go: the image REGISTRY/warmer, the chart
# oci://REGISTRY/charts/warmer.
REGISTRY ?= ghcr.io/warmer-dev

# The image docker-build and image make, and docker-push pushes.
# config/default runs the release named in it (set-release); an overlay's
# `images:` picks another.
IMG ?= $(REGISTRY)/warmer:$(VERSION)

# The OCI tarball `make image` writes, and the commit's time it stamps as
# the images' creation time (so a commit always gives the same digest).
IMAGE_TAR ?= bin/warmer-image.tar
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

# The platforms `make image` and `make push` build.
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
# Where kubectl-warmer is built for: where people run kubectl.
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64

.PHONY: image
image: ## Build the image IMG for linux/amd64 and linux/arm64 without Docker, reproducibly, as an OCI tarball (IMAGE_TAR).
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image --image $(IMG) --version $(VERSION) --out $(IMAGE_TAR) --platforms $(IMAGE_PLATFORMS)

.PHONY: push
push: ## Build the image IMG as `make image` does and push it to IMG's registry (no Docker; logins from ~/.docker/config.json).
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/image --image $(IMG) --version $(VERSION) --out $(IMAGE_TAR) --platforms $(IMAGE_PLATFORMS) --push

# need-docker stops a recipe with one line when there is no docker command
# or no engine answering it, rather than with docker's own error halfway.
define need-docker
@command -v docker >/dev/null || { echo "$@: no docker command on PATH; install Docker, or build the Dockerfile with another OCI builder" >&2; exit 1; }
@docker info >/dev/null 2>&1 || { echo "$@: no Docker engine answers (is the daemon running? is DOCKER_HOST right?)" >&2; exit 1; }
endef

.PHONY: docker-build
docker-build: ## Build the image IMG from the Dockerfile (needs docker).
	$(need-docker)
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image IMG (needs docker, logged in to the registry).
	$(need-docker)
	docker push $(IMG)

# RELEASE: the version a release installs, as vX.Y.Z or vX.Y.Z-pre.
.PHONY: set-release
set-release: ## Set the version config/default and the chart install by default (RELEASE=vX.Y.Z), before tagging a release.
	@[[ "$(RELEASE)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]] || { echo "set-release: want RELEASE=vX.Y.Z[-pre], got '$(RELEASE)'" >&2; exit 1; }
	sed -i -E 's/^(    newTag: ).*/\1$(RELEASE)/' config/default/kustomization.yaml
	sed -i -E 's/^appVersion: .*/appVersion: "$(RELEASE)"/; s/^version: .*/version: $(patsubst v%,%,$(RELEASE))/' charts/warmer/Chart.yaml

# The folder make release writes and make publish pushes from.
DIST ?= dist

.PHONY: release
release: ## Write DIST (VERSION=vX.Y.Z): install.yaml and the Helm chart pinning REGISTRY/warmer by digest, the image index (OCI tarball), SBOMs, kubectl-warmer per platform with its krew manifest, SHA256SUMS; reproducible from the commit.
	rm -rf $(DIST)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) go run ./hack/release build --version $(VERSION) --registry $(REGISTRY) --dist $(DIST) --platforms $(IMAGE_PLATFORMS) --plugin-platforms $(PLUGIN_PLATFORMS)

.PHONY: publish
publish: ## Push what make release wrote (VERSION, REGISTRY as given to it): the image index to REGISTRY/warmer:VERSION, the chart to oci://REGISTRY/charts.
	helm="$$(hack/install-helm.sh)/helm"; go run ./hack/release publish --version $(VERSION) --registry $(REGISTRY) --dist $(DIST) --platforms $(IMAGE_PLATFORMS) --helm "$$helm"

# The overlay `make deploy IMG=...` writes and applies: config/default
# running IMG (hack/deploy-overlay.sh).
DEPLOY_DIR ?= bin/deploy

.PHONY: deploy-overlay
deploy-overlay: ## Write DEPLOY_DIR: config/default running the image IMG (what `make push` pushed).
	hack/deploy-overlay.sh $(IMG) $(DEPLOY_DIR)

.PHONY: deploy
deploy: ## Install or upgrade warmer in the current kubectl context: with IMG=..., config/default running that image; without, the release config/default names.
ifneq ($(filter command line environment,$(origin IMG)),)
	hack/deploy-overlay.sh $(IMG) $(DEPLOY_DIR)
	kubectl apply -k $(DEPLOY_DIR)
else
	kubectl apply -k config/default
endif

.PHONY: undeploy
undeploy: ## Remove warmer, its CRDs and so every ImageWarm, from the current kubectl context.
	kubectl delete -k config/default --ignore-not-found
