# capi-monolith: one binary, three Cluster API providers.
#
# Tools (kube-apiserver, etcd, kube-controller-manager, Cluster API's core, kubeadm bootstrap and
# kubeadm control plane managers, clusterctl, controller-gen) are built from
# the Go module proxy into a cache outside the work tree, keyed by version, so
# a warm machine never builds them twice.

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := build
export GOTOOLCHAIN := local

KUBE_VERSION        ?= v1.36.3
CAPI_VERSION        ?= v1.14.2
CONTROLLER_GEN_VER  ?= v0.21.0
CACHE_DIR           ?= $(or $(CAPI_MONOLITH_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/capi-monolith)
export CAPI_MONOLITH_CACHE := $(CACHE_DIR)

BIN_DIR             := bin
BINARY              := $(BIN_DIR)/capi-monolith
CONTROLLER_GEN      := $(CACHE_DIR)/tools/controller-gen-$(CONTROLLER_GEN_VER)
CAPI_CORE_MANAGER   := $(CACHE_DIR)/capi-core/$(CAPI_VERSION)/manager
CAPI_KUBEADM_BOOTSTRAP_MANAGER     := $(CACHE_DIR)/capi-kubeadm-bootstrap/$(CAPI_VERSION)/manager
CAPI_KUBEADM_CONTROL_PLANE_MANAGER := $(CACHE_DIR)/capi-kubeadm-control-plane/$(CAPI_VERSION)/manager
# Every Cluster API manager dev runs (dev/capimanager), the files make builds.
CAPI_MANAGERS       := $(CAPI_CORE_MANAGER) $(CAPI_KUBEADM_BOOTSTRAP_MANAGER) $(CAPI_KUBEADM_CONTROL_PLANE_MANAGER)
CLUSTERCTL          := $(CACHE_DIR)/clusterctl/$(CAPI_VERSION)/clusterctl
ENVTEST_DIR         := $(CACHE_DIR)/envtest/$(KUBE_VERSION)

# A KUBEBUILDER_ASSETS given by the user (setup-envtest users) wins over ours.
ifeq ($(strip $(KUBEBUILDER_ASSETS)),)
ENVTEST_ASSETS_DEP  := $(ENVTEST_DIR)/kube-apiserver $(ENVTEST_DIR)/kube-controller-manager
export KUBEBUILDER_ASSETS := $(ENVTEST_DIR)
endif
export CAPI_CORE_MANAGER CAPI_KUBEADM_BOOTSTRAP_MANAGER CAPI_KUBEADM_CONTROL_PLANE_MANAGER CLUSTERCTL

# One entry per module: the package its markers live in, and its manifests folder.
MODULES             := infra machinepool ipam runtimeext
GO_TEST_FLAGS       ?= -race=false
TEST_TIMEOUT        ?= 30m

##@ Build

.PHONY: build
build: ## Build the capi-monolith binary.
	CGO_ENABLED=0 go build -trimpath -o $(BINARY) .

# The manager image make image builds (tag from VERSION, default dev).
IMAGE_TAG           ?= $(or $(VERSION),dev)
LOCAL_IMAGE         ?= capi-monolith:$(IMAGE_TAG)
export CAPI_MONOLITH_TEST_IMAGE := $(LOCAL_IMAGE)

.PHONY: image
image: build ## Build the manager image LOCAL_IMAGE (default capi-monolith:$$VERSION or capi-monolith:dev) FROM scratch with the local Docker Engine; nothing is pulled.
	IMAGE=$(LOCAL_IMAGE) BINARY=$(BINARY) ./hack/image/build.sh

.PHONY: dev
dev: build envtest-assets capi-managers clusterctl ## The main job: a whole Cluster API management cluster (etcd, kube-apiserver, Cluster API core, kubeadm bootstrap and control plane, every module); Ctrl-C stops it.
	$(BINARY) dev $(ARGS)

.PHONY: run
run: build ## Run the manager against the cluster in $KUBECONFIG with every module.
	$(BINARY) --leader-elect=false $(ARGS)

##@ Tools (cached outside the work tree)

$(CONTROLLER_GEN):
	mkdir -p $(dir $@)
	cd hack/tools && CGO_ENABLED=0 go build -trimpath -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# One rule per binary of the pinned Cluster API module (hack/capi):
# hack/build-capi.sh <name> builds it where its variable says.
$(CAPI_CORE_MANAGER):
	CAPI_VERSION=$(CAPI_VERSION) ./hack/build-capi.sh core

$(CAPI_KUBEADM_BOOTSTRAP_MANAGER):
	CAPI_VERSION=$(CAPI_VERSION) ./hack/build-capi.sh kubeadm-bootstrap

$(CAPI_KUBEADM_CONTROL_PLANE_MANAGER):
	CAPI_VERSION=$(CAPI_VERSION) ./hack/build-capi.sh kubeadm-control-plane

$(CLUSTERCTL):
	CAPI_VERSION=$(CAPI_VERSION) ./hack/build-capi.sh clusterctl

$(ENVTEST_DIR)/kube-apiserver $(ENVTEST_DIR)/kube-controller-manager &:
	KUBE_VERSION=$(KUBE_VERSION) ./hack/build-envtest-assets.sh

.PHONY: tools
tools: $(CONTROLLER_GEN) capi-managers clusterctl envtest-assets ## Build every cached tool.

.PHONY: envtest-assets
envtest-assets: $(ENVTEST_ASSETS_DEP) ## Build kube-apiserver and etcd for envtest, and the kube-controller-manager dev runs (unless KUBEBUILDER_ASSETS is set).

.PHONY: capi-core
capi-core: $(CAPI_CORE_MANAGER) ## Build Cluster API's own core manager.

.PHONY: capi-kubeadm-bootstrap
capi-kubeadm-bootstrap: $(CAPI_KUBEADM_BOOTSTRAP_MANAGER) ## Build Cluster API's own kubeadm bootstrap manager.

.PHONY: capi-kubeadm-control-plane
capi-kubeadm-control-plane: $(CAPI_KUBEADM_CONTROL_PLANE_MANAGER) ## Build Cluster API's own kubeadm control plane manager.

.PHONY: capi-managers
capi-managers: $(CAPI_MANAGERS) ## Build every Cluster API manager dev runs (core, kubeadm bootstrap, kubeadm control plane).

.PHONY: clusterctl
clusterctl: $(CLUSTERCTL) ## Build clusterctl from the pinned Cluster API module (go install fails on its replace directives) and print its path.
	@echo $(CLUSTERCTL)

##@ Generate and verify

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy, CRDs, RBAC and webhook configurations from markers.
	CONTROLLER_GEN=$(CONTROLLER_GEN) ./hack/generate.sh

.PHONY: verify
verify: ## Fail when generated files or go.mod/go.sum are stale.
	./hack/verify.sh

.PHONY: lint
lint: ## Static checks.
	go vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

##@ Test

.PHONY: docker-test-images
docker-test-images: ## Build the images the docker backend's tests run (from Debian packages; nothing is pulled).
	./hack/docker-test-images/build.sh

.PHONY: test
# The longest packages are listed first: go test starts test runs in the
# order packages are named (./... then adds the rest once), so the 11-minute
# end-to-end suite does not start last and run alone at the end.
LONG_TEST_PACKAGES  := ./test/e2e/ ./dev/ ./test/clusterctl/ ./ipam/ ./machinepool/

test: envtest-assets capi-managers clusterctl docker-test-images image ## Run every test: unit, envtest integration, Docker, the image, end to end, and the short set of Cluster API's own e2e specs.
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -count=1 $(LONG_TEST_PACKAGES) ./...
	$(MAKE) --no-print-directory test-capi-e2e CAPI_E2E_LABELS=short

# FUZZTIME is how long `make fuzz` runs each fuzz target; `make test` runs
# only their seed corpora (plain `go test`).
FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: envtest-assets ## Run every `go test -fuzz` target (webhooks, hook server, cloud-init and kubeadm bootstrap parsing, workload API handler, IP allocator, pool specs) for FUZZTIME each (default 1m).
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	  pkg=./$$(dirname $${f#./}); \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "== $$t ($$pkg, $(FUZZTIME))"; \
	    go test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: test-e2e
test-e2e: envtest-assets capi-managers clusterctl docker-test-images ## Run only the end-to-end suite (part of make test) on a dev environment.
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) -count=1 ./test/e2e/ -ginkgo.v

# Cluster API's own e2e specs (test/capie2e, a module of its own pinning
# sigs.k8s.io/cluster-api/test) against a capi-monolith dev the suite starts.
# CAPI_E2E_LABELS is a ginkgo label filter: `short` is make test's set; the
# default leaves out the `bench` specs, which bench-capi-scale runs.
CAPI_E2E_LABELS     ?= !bench
CAPI_E2E_TIMEOUT    ?= 120m

.PHONY: test-capi-e2e
test-capi-e2e: build envtest-assets capi-managers clusterctl ## Run Cluster API v1.14.2's e2e spec library (test/capie2e) against capi-monolith dev: every spec that applies but the `bench` ones (CAPI_E2E_LABELS=short: make test's set).
	cd test/capie2e && go test -tags e2e $(GO_TEST_FLAGS) -timeout $(CAPI_E2E_TIMEOUT) -count=1 . -ginkgo.v $(if $(CAPI_E2E_LABELS),-ginkgo.label-filter='$(CAPI_E2E_LABELS)')

.PHONY: test-chaos
test-chaos: envtest-assets capi-managers docker-test-images image ## Run the long chaos suite (test/chaos, build tag chaos; make test runs only its short run): clusters of every flavor created, scaled and deleted while the manager is SIGKILLed, kube-apiserver restarted, Docker containers killed; issue 28's bad inputs mixed with SIGKILLs.
	go test -tags chaos -count=1 -timeout 30m ./test/chaos/ -v

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-28s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Benchmarks (not part of make test)

BENCH_IPAM_ARGS     ?= -n 1000,10000 -runs 3
# IPAM_PEER_SOURCE is the in-cluster IPAM provider's source (a git directory
# or a folder) for bench-ipam-sbs; it is built in a scratch folder.
IPAM_PEER_SOURCE    ?=
BENCH_IPAM_SBS_ARGS ?= -n 1000,5000 -runs 1

.PHONY: bench
bench: bench-sharedcache bench-scale bench-latency bench-ipam bench-hooks bench-workload bench-failover ## Run every benchmark, one after another, and write its results under test/bench/results.

.PHONY: bench-sharedcache
bench-sharedcache: envtest-assets ## Benchmark one process with every module against three, on 1,000 clusters: steady RSS and watches (args: BENCH_SHAREDCACHE_ARGS).
	go run ./test/bench/sharedcache $(BENCH_SHAREDCACHE_ARGS)

.PHONY: bench-scale
bench-scale: envtest-assets ## Benchmark 100/1,000/5,000 inMemory machines created at once: time, peak RSS, CPU, cost per machine, CPU profile (args: BENCH_SCALE_ARGS).
	go run ./test/bench/scale $(BENCH_SCALE_ARGS)

.PHONY: bench-latency
bench-latency: envtest-assets ## Benchmark create-to-provisioned p50/p99 of MonolithMachines at 50 creates/s for 60 s (args: BENCH_LATENCY_ARGS).
	go run ./test/bench/latency $(BENCH_LATENCY_ARGS)

.PHONY: bench-ipam
bench-ipam: envtest-assets ## Benchmark IPAM claim fulfilment against envtest (args: BENCH_IPAM_ARGS).
	go run ./test/bench/ipam $(BENCH_IPAM_ARGS)

.PHONY: bench-ipam-sbs
bench-ipam-sbs: envtest-assets ## Side-by-side IPAM benchmark against the in-cluster IPAM provider (IPAM_PEER_SOURCE=<git dir or folder>, args: BENCH_IPAM_SBS_ARGS).
	@test -n "$(IPAM_PEER_SOURCE)" || { echo "set IPAM_PEER_SOURCE to the in-cluster IPAM provider's git directory or source folder"; exit 1; }
	go run ./test/bench/ipam -peer-source $(IPAM_PEER_SOURCE) $(BENCH_IPAM_SBS_ARGS)

.PHONY: bench-hooks
bench-hooks: envtest-assets ## Benchmark runtime hooks over TLS (the module in the manager, against envtest): lifecycle calls/s and p50/p99 at 500 calls/s, GeneratePatches on 50 MDs (args: BENCH_HOOKS_ARGS).
	go run ./test/bench/hooks $(BENCH_HOOKS_ARGS)

.PHONY: bench-workload
bench-workload: envtest-assets capi-managers ## Benchmark 100 workload clusters (KCP of 1 + MachineDeployment of 3, inMemory) from capi-monolith dev: time to all Running, peak and per-cluster RSS of the binary and the managers, then 200 objects per cluster and a restart of dev on its --data-dir: memory and journal bytes per cluster, time to every cluster served again (args: BENCH_WORKLOAD_ARGS, e.g. -clusters 500 -out test/bench/results/workload-500.md).
	go run ./test/bench/workload $(BENCH_WORKLOAD_ARGS)

.PHONY: bench-workload-sbs
bench-workload-sbs: N ?= 100
bench-workload-sbs: PROFILE_DIR ?= $(or $(TMPDIR),/tmp)/capi-monolith-bench-profiles/sbs-$(N)
bench-workload-sbs: envtest-assets capi-managers ## Side-by-side workload benchmark: N clusters (KCP 1 + MD 3) from the same dev, once with our infra module, once with Cluster API's in-memory provider (test module v1.14.2, built in a scratch folder) beside it: time to Available/Running, apiserver requests and CPU per Machine, provider CPU and RSS per cluster, the provider's and kube-apiserver's CPU profiles into PROFILE_DIR (N=100, args: BENCH_WORKLOAD_SBS_ARGS, e.g. -rounds 2).
	go run ./test/bench/workload -sbs -clusters $(N) -cpu-profile-dir $(PROFILE_DIR) $(BENCH_WORKLOAD_SBS_ARGS)

.PHONY: bench-capi-scale
bench-capi-scale: CLUSTERS ?= 10
bench-capi-scale: CONCURRENCY ?= 5
bench-capi-scale: SKIP_UPGRADE ?= false
bench-capi-scale: build envtest-assets capi-managers clusterctl ## Run Cluster API's own ScaleSpec (test/capie2e, label bench) against capi-monolith dev: CLUSTERS clusters of KCP 1 + MachineDeployment 3 created, upgraded, deleted, CONCURRENCY at a time; wall time of each phase, load, peak RSS of dev's processes, in test/bench/results/capi-scale-<CLUSTERS>.md (CLUSTERS=10 CONCURRENCY=5, SKIP_UPGRADE=true leaves out the upgrade; not part of make bench).
	cd test/capie2e && CAPI_SCALE_CLUSTER_COUNT=$(CLUSTERS) CAPI_SCALE_CONCURRENCY=$(CONCURRENCY) \
	  CAPI_SCALE_SKIP_UPGRADE=$(SKIP_UPGRADE) CAPI_SCALE_RESULTS=$(CURDIR)/test/bench/results/capi-scale-$(CLUSTERS).md \
	  CAPI_SCALE_COMMIT=$$(git rev-parse --short HEAD)$$(git diff --quiet HEAD || echo -dirty) \
	  CAPI_SCALE_COMMAND='make bench-capi-scale CLUSTERS=$(CLUSTERS) CONCURRENCY=$(CONCURRENCY) SKIP_UPGRADE=$(SKIP_UPGRADE)' \
	  go test -tags e2e $(GO_TEST_FLAGS) -timeout $(CAPI_E2E_TIMEOUT) -count=1 . -ginkgo.v -ginkgo.label-filter=bench

.PHONY: bench-failover
bench-failover: envtest-assets ## Benchmark two replicas (secrets state, leader lease) with 100 and 1,000 inMemory clusters of 20 ConfigMaps: state Secrets and bytes, ports, RSS, then the leader's SIGKILL: time to every workload API answering through the survivor, objects lost (args: BENCH_FAILOVER_ARGS, e.g. -clusters 100).
	go run ./test/bench/failover $(BENCH_FAILOVER_ARGS)

##@ Release

RELEASE_DIR         ?= out

.PHONY: release-manifests
release-manifests: build ## Write clusterctl repositories for VERSION (e.g. VERSION=v0.1.0) to RELEASE_DIR (default out/); IMAGE overrides the default image.
	@test -n "$(VERSION)" || { echo "VERSION is required, e.g. make release-manifests VERSION=v0.1.0" >&2; exit 1; }
	$(BINARY) bundle --version $(VERSION) --out $(RELEASE_DIR) $(if $(IMAGE),--image $(IMAGE))
