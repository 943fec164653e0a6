# toolplane: the operator (root module) and the toolkit library (./toolkit).

# Every tool is pinned and built into bin/ from the Go module proxy.
LOCALBIN ?= $(shell pwd)/bin
K8S_VERSION ?= 1.37.2
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
ACTIONLINT_VERSION ?= v1.7.7

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
HELM ?= $(LOCALBIN)/helm
ACTIONLINT ?= $(LOCALBIN)/actionlint
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(K8S_VERSION)

# The image `make docker-build` builds and `make docker-push` pushes; it holds
# /manager, /gateway and /example-tools.
IMG ?= ghcr.io/toolplane/toolplane:0.1.0
CONTAINER_TOOL ?= docker
PLATFORMS ?= linux/amd64,linux/arm64

# Go modules of the repository that hold the project's code.
MODULES := . toolkit
GO_TEST_FLAGS ?= -race -timeout 30m
# How long `make test` runs each fuzz target (`make fuzz` runs longer).
FUZZ_TIME_SHORT ?= 5s
FUZZ_TIME ?= 2m
# The ownership model test: `make test` runs a fixed seed briefly;
# `make model-test` runs MODEL_STEPS steps of MODEL_SEED (random: a new seed).
MODEL_SEED ?= random
MODEL_STEPS ?= 500
# How many ToolSets `make bench-scale` runs: 1000 or 5000.
BENCH_SIZE ?= 1000

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Run it

# The demo runs as a binary of its own, not under `go run`, so that a SIGTERM
# reaches it and it stops its child processes.
.PHONY: demo
demo: build envtest ## Run the whole loop on an embedded control plane: operator, workloads, ToolSets, the table, an agent's calls (DEMO_FLAGS=--wait keeps it up).
	go build -o $(LOCALBIN)/toolplane-demo ./hack/demo
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) $(LOCALBIN)/toolplane-demo --bin $(LOCALBIN) $(DEMO_FLAGS)

.PHONY: test
test: manifests generate envtest helm interop-deps conformance-deps browser-deps ## Run every test: unit, envtest (real kube-apiserver and etcd), the install manifests and chart, and brief fuzzing.
	$(MAKE) --no-print-directory -j2 --output-sync=target test-lane-envtest test-lane-toolkit

# `make test` runs in two lanes side by side. The root module's tests end
# with the envtest specs of ./controllers, one process on about one core
# for most of the lane; the other lane, the toolkit module's tests (./spec
# under the race detector above all) and then every module's fuzz targets,
# takes the other core. Each lane's output is printed whole when it ends.
.PHONY: test-lane-envtest test-lane-toolkit
test-lane-envtest:
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) HELM=$(HELM) go test $(GO_TEST_FLAGS) ./...

test-lane-toolkit:
	cd toolkit && go test $(GO_TEST_FLAGS) ./...
	hack/fuzz.sh $(FUZZ_TIME_SHORT) $(MODULES)

# The attack suite (test/attacks) runs its cheap specs in `make test`; this
# runs the heavy ones: thousands of connections, streams and sessions, and
# hundreds of concurrent large results, against the real binaries.
.PHONY: test-attacks
test-attacks: envtest ## Run the heavy specs of the attack suite (test/attacks: one small hostile input per spec against the real manager, gateway and example-tools; peak RSS and a well-behaved client checked).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -count=1 -timeout 15m ./test/attacks -args -ginkgo.label-filter=heavy

.PHONY: model-test
model-test: manifests generate envtest ## Run the ownership model test (random changes, restarts and failovers against a model of the rule) for MODEL_STEPS steps of MODEL_SEED (default 500 of a random seed); prints the seed, steps and faults.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) MODEL_SEED=$(MODEL_SEED) MODEL_STEPS=$(MODEL_STEPS) \
		go test -race -count=1 -timeout 60m -v ./controllers -run TestControllers -args -ginkgo.focus="The ownership model"

.PHONY: fuzz
fuzz: ## Run every fuzz target of every module for FUZZ_TIME each (default 2m) and print the exec counts.
	hack/fuzz.sh $(FUZZ_TIME) $(MODULES)

.PHONY: run
run: manifests generate ## Run the manager against the cluster in the current kubeconfig.
	go run ./cmd/manager --table-namespace $${TABLE_NAMESPACE:-toolplane-system}

##@ Benchmarks

.PHONY: bench-scale
bench-scale: build envtest ## Measure BENCH_SIZE ToolSets of 10 tools (default 1000; 5000 is the larger size) against the API server's own limit: convergence, steady state, churn; prints the figure line last (BENCH_SCALE_FLAGS=-h for knobs).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./hack/bench/scale --manager $(LOCALBIN)/manager --toolsets $(BENCH_SIZE) $(BENCH_SCALE_FLAGS)

.PHONY: bench-search
bench-search: ## Rank the tasks of hack/search/corpus (978 real tools of 38 MCP servers) with toolkit/search and plain BM25 side by side; prints one figure line (recall, MRR, latency, index size, bytes read).
	go run ./hack/search $(BENCH_SEARCH_FLAGS)

.PHONY: bench-gateway
bench-gateway: envtest ## Measure the gateway (two replicas, 10,000 tools, both MCP eras) against the workload called directly and a bare reverse proxy in its place (the floor), on loopback: throughput ratios, added p50/p99, peak RSS; prints the figure line last (BENCH_GATEWAY_FLAGS=-h for knobs).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./hack/bench/gateway $(BENCH_GATEWAY_FLAGS)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate the CRD and RBAC manifests from the API types and markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./api/...;./controllers/..." output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: chart-crds
chart-crds: manifests ## Copy the generated CRDs into the Helm chart (test/install fails when they drift).
	hack/chart/crds.sh config/crd/bases charts/toolplane/templates/crd

.PHONY: generate
generate: controller-gen ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt on every module.
	@for m in $(MODULES); do (cd $$m && go fmt ./...); done

.PHONY: vet
vet: ## Run go vet on every module.
	@for m in $(MODULES); do (cd $$m && go vet ./...); done

.PHONY: lint
lint: golangci-lint ## Run golangci-lint on every module.
	@for m in $(MODULES); do (cd $$m && $(GOLANGCI_LINT) run --allow-parallel-runners ./...); done

.PHONY: verify
verify: manifests generate chart-crds fmt actionlint ## Regenerate and tidy everything, lint the GitHub workflows, then fail if the tree changed.
	$(ACTIONLINT) .github/workflows/*.yaml
	@for m in $(MODULES); do (cd $$m && go mod tidy); done
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "The tree is dirty after regenerating; commit the result:"; git status --porcelain; git --no-pager diff --stat; exit 1; fi

##@ Build

.PHONY: build
build: manifests generate ## Build the manager, gateway, example-tools and kubectl-toolplane (the kubectl plugin, with its completion script kubectl_complete-toolplane) binaries into bin/.
	go build -o $(LOCALBIN)/manager ./cmd/manager
	go build -o $(LOCALBIN)/gateway ./cmd/gateway
	go build -o $(LOCALBIN)/example-tools ./cmd/example-tools
	go build -o $(LOCALBIN)/kubectl-toolplane ./cmd/kubectl-toolplane
	install -m 0755 cmd/kubectl-toolplane/kubectl_complete-toolplane $(LOCALBIN)/

# The image targets need a container engine (Docker, or CONTAINER_TOOL=podman);
# nothing else in this Makefile does.
.PHONY: docker-build
docker-build: ## Build the image IMG (default ghcr.io/toolplane/toolplane:0.1.0), holding /manager, /gateway and /example-tools; needs Docker (or CONTAINER_TOOL=podman).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: docker-buildx
docker-buildx: ## Build and push IMG for every platform in PLATFORMS (default linux/amd64,linux/arm64) with docker buildx.
	$(CONTAINER_TOOL) buildx build --platform=$(PLATFORMS) --push -t $(IMG) .

# The version stamped into the binaries and the chart by release-dry-run.
VERSION ?= v0.0.0-dev
# Every platform the release builds binaries for.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
RELEASE_COMMANDS ?= manager gateway example-tools kubectl-toolplane
# Where the release publishes its archives: the krew manifest's URLs.
RELEASE_URL ?= https://github.com/toolplane/toolplane/releases/download/$(VERSION)

.PHONY: release-dry-run
release-dry-run: helm ## Build every binary for every platform (RELEASE_PLATFORMS) into dist/, the kubectl plugin's krew archives and manifest (dist/toolplane.yaml, from hack/krew), package the chart, and write checksums: what the release workflow publishes, without publishing.
	rm -rf dist && mkdir -p dist
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; dir=dist/toolplane_$(VERSION)_$${os}_$${arch}; \
		for c in $(RELEASE_COMMANDS); do \
			echo "go build $$dir/$$c"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags="-s -w -X main.version=$(VERSION)" -o $$dir/$$c ./cmd/$$c || exit 1; \
		done; \
		if [ -e $$dir/kubectl-toolplane ]; then \
			plugin=dist/kubectl-toolplane_$(VERSION)_$${os}_$${arch}; mkdir -p $$plugin; \
			cp $$dir/kubectl-toolplane cmd/kubectl-toolplane/kubectl_complete-toolplane LICENSE $$plugin/; \
			echo "tar $$plugin.tar.gz"; \
			tar -C $$plugin -czf $$plugin.tar.gz kubectl-toolplane kubectl_complete-toolplane LICENSE && rm -rf $$plugin; \
		fi; \
		cp LICENSE $$dir/ && tar -C dist -czf $$dir.tar.gz $$(basename $$dir) && rm -rf $$dir; \
	done
	@case " $(RELEASE_COMMANDS) " in *" kubectl-toolplane "*) hack/krew/render.sh $(VERSION) $(RELEASE_URL) dist;; esac
	$(HELM) lint --strict charts/toolplane
	$(HELM) package charts/toolplane --version $(VERSION:v%=%) --app-version $(VERSION:v%=%) -d dist
	cd dist && sha256sum *.tar.gz *.tgz > checksums.txt && cat checksums.txt

##@ Dependencies

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

.PHONY: interop-deps
interop-deps: hack/interop/node_modules/.package-lock.json ## Install the TypeScript MCP SDK and server-everything for the interop tests of toolkit/server and controllers (npm ci).
hack/interop/node_modules/.package-lock.json: hack/interop/package.json hack/interop/package-lock.json
	npm ci --prefix hack/interop --no-audit --no-fund

.PHONY: conformance-deps
conformance-deps: hack/conformance/node_modules/.package-lock.json ## Install the official MCP conformance suite and the Node 22 it needs (npm ci), for the gateway's conformance test.
hack/conformance/node_modules/.package-lock.json: hack/conformance/package.json hack/conformance/package-lock.json
	npm ci --prefix hack/conformance --no-audit --no-fund

.PHONY: browser-deps
browser-deps: ## Install Debian's chromium, for the gateway catalog's browser test (nothing to do when /usr/bin/chromium exists).
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "Installing chromium with apt-get"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; \
	fi

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd $(ENVTEST_ASSETS)/kubectl ## Build the test control plane (kube-apiserver, etcd) and kubectl, for the plugin's test, from the Go module proxy.
$(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd $(ENVTEST_ASSETS)/kubectl: | $(LOCALBIN)
	K8S_VERSION=$(K8S_VERSION) hack/controlplane/build.sh $(ENVTEST_ASSETS)

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen into bin/.
$(CONTROLLER_GEN): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build golangci-lint into bin/.
$(GOLANGCI_LINT): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: actionlint
actionlint: $(ACTIONLINT) ## Build actionlint, the GitHub Actions workflow linter, into bin/.
$(ACTIONLINT): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

.PHONY: helm
helm: $(HELM) ## Build helm into bin/.
$(HELM): | $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
