# Presentation platform: router, cells, renderers. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X slidecells/cell/api.Version=$(VERSION)
TEST_TIMEOUT ?= 30m

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-14s %s\n", $$1, $$2}'

# The preview host's runtime: npm packages pinned by cell/preview/runtime/package-lock.json,
# installed with npm ci only when the lock file changed, bundled into bin/preview-runtime.
PREVIEW_RUNTIME_SRC := cell/preview/runtime
PREVIEW_NPM_STAMP := $(PREVIEW_RUNTIME_SRC)/node_modules/.package-lock.json

$(PREVIEW_NPM_STAMP): $(PREVIEW_RUNTIME_SRC)/package.json $(PREVIEW_RUNTIME_SRC)/package-lock.json
	@command -v npm >/dev/null || [ "$$(id -u)" != 0 ] || { echo "installing Debian's nodejs and npm"; \
	  apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null; }
	@command -v npm >/dev/null || { echo "npm not found: install Debian's nodejs and npm"; exit 1; }
	cd $(PREVIEW_RUNTIME_SRC) && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

.PHONY: npm
npm: $(PREVIEW_NPM_STAMP) ## Install the preview runtime's npm packages (npm ci, only when needed)

.PHONY: build
build: npm ## Build every binary into bin/, and the preview runtime into bin/preview-runtime
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./router/cmd/... ./cell/cmd/... ./deploy/cmd/... $(wildcard ./renderer/cmd/renderer)
	$(BIN)/preview build-runtime -src $(PREVIEW_RUNTIME_SRC) -out $(BIN)/preview-runtime

.PHONY: run
run: build ## Start the local deployment (PostgreSQL, directory, cell-a, cell-b, router) with demo data
	$(BIN)/devstack -dir .run -bin $(BIN)

# Packages whose Fuzz* targets `make fuzz` (and so `make test`) runs for FUZZTIME each. Add a
# package here when it gains a fuzz target; every Fuzz* function in it is found by itself.
# FUZZTIME is a count of executions (a few seconds per target here): a duration such as 5s
# makes Go 1.26's fuzz coordinator fail now and then with a bare "context deadline exceeded"
# and no failing input when the machine is busy (go.dev/issue/75804, fixed in Go 1.27).
FUZZ_PACKAGES := ./router/hop ./router/h1 ./cell/design ./cell/compile
FUZZTIME ?= 10000x

# The tests' events go through bin/testsummary: package lines, failed tests' output, the skipped
# tests with their reasons, and "N passed, N failed, N skipped".
.PHONY: test
test: build ## Run unit, integration and end-to-end tests (race detector, real PostgreSQL and Chromium), then fuzz briefly
	set -o pipefail; SLIDECELLS_BIN=$(BIN) $(BIN)/withpg -- $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -json ./... | $(BIN)/testsummary
	@$(MAKE) --no-print-directory fuzz

.PHONY: fuzz
fuzz: ## Run every Fuzz* target of FUZZ_PACKAGES for FUZZTIME each (make fuzz FUZZTIME=5000000x for a longer run)
	@set -e; for pkg in $(FUZZ_PACKAGES); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz: $$pkg $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: test-short
test-short: ## Run only the fast unit tests
	$(GO) test -short -count=1 ./...

# staticcheck at a pinned version, fetched through the Go module proxy on first use.
STATICCHECK_VERSION := v0.8.2

.PHONY: lint
lint: ## gofmt, go vet, staticcheck (pinned version)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Kubernetes manifests (deploy/k8s: kustomize base, an overlay per cell and one for the router)
# and images (deploy/Dockerfile, one stage per binary). See CELLS.md, "Kubernetes".
IMAGES := router cellctl cell preview renderer

.PHONY: deploy-check
deploy-check: ## Render every Kubernetes overlay with kustomize and validate it offline (types, pod security, network flows, images, secrets)
	$(GO) run ./deploy/cmd/deploycheck

.PHONY: release-info
release-info: ## Print the release: image revisions, contract versions, render profile digest, migration versions
	$(GO) run -ldflags '$(LDFLAGS)' ./deploy/cmd/releaseinfo

.PHONY: release-tag
release-tag: ## Pin the overlays' slidecells/* images to $(VERSION) (deploy/k8s/components/release)
	sed -i -E 's/^(    newTag: ).*/\1$(VERSION)/' deploy/k8s/components/release/kustomization.yaml
	@grep -n 'newTag' deploy/k8s/components/release/kustomization.yaml

.PHONY: images
images: ## Build every image with Docker, tagged $(VERSION) (needs a Docker engine)
	@set -e; for t in $(IMAGES); do \
	  docker build -f deploy/Dockerfile --target $$t --build-arg VERSION=$(VERSION) -t slidecells/$$t:$(VERSION) .; \
	done

.PHONY: bench-router
bench-router: ## Router vs direct vs nginx benchmark (see BENCHMARKS.md)
	$(GO) run ./loadtest/routerbench

.PHONY: bench-compile
bench-compile: ## Compile benchmark: a page importing 20 components, p50/p99 per compile
	$(GO) test ./cell/compile -run '^$$' -bench CompilePage20 -benchtime 1000x -count 3

# The same-run regression check (loadtest/benchcheck, BENCHMARKS.md "Same-run regression check"):
# the key benchmarks of a reference commit (the last v* tag, else loadtest/benchcheck/REFERENCE)
# and of this tree, back to back. CI runs it with BENCH_CHECK_FLAGS=-short.
BENCH_CHECK_FLAGS ?=

.PHONY: bench-check
bench-check: build ## Key benchmarks of the reference commit and HEAD back to back; fails when HEAD is worse beyond a tolerance (BENCH_CHECK_FLAGS="-short -only queue -ref <commit>")
	$(GO) run ./loadtest/benchcheck -bin $(BIN) $(BENCH_CHECK_FLAGS)

.PHONY: bench-move
bench-move: build ## Move benchmark: a workspace of 1,000 pages and 200 MiB of assets under write load, step times and write window (see BENCHMARKS.md)
	$(GO) run ./loadtest/movebench -bin $(BIN) -pages 1000 -assets 200

# Load generation and the release gate (loadtest/loadgen, see BENCHMARKS.md). None of these is
# part of make test; the unit tests of their report and gate logic are (loadtest/load).
LOAD_SCENARIO ?= api
LOAD_FLAGS ?=

.PHONY: load
load: ## Load the running `make run` deployment: LOAD_SCENARIO=api|jobs|render|mixed, LOAD_FLAGS="-rate 200 -duration 1m"
	$(GO) run ./loadtest/loadgen -scenario $(LOAD_SCENARIO) -env .run/env $(LOAD_FLAGS)

GATE_BASELINE := loadtest/gate/baseline.json

.PHONY: gate
gate: build ## Release gate (own deployment, about 5 min here, at most 15): 200 validations and 200 screenshots under mixed load; fails when the interactive P95 is >20% above the baseline
	$(GO) run ./loadtest/loadgen -scenario gate -bin $(BIN) -gate $(GATE_BASELINE) -max 15m

.PHONY: gate-baseline
gate-baseline: build ## Record a new release-gate baseline (loadtest/gate/baseline.json, with this machine's description; commit it)
	@mkdir -p $(dir $(GATE_BASELINE))
	$(GO) run ./loadtest/loadgen -scenario gate -bin $(BIN) -record-baseline $(GATE_BASELINE) -max 15m

.PHONY: bench-scale
bench-scale: build ## Scale evidence: the api scenario on 1, 2 and 3 cells, and the router with 100,000 workspaces (see BENCHMARKS.md)
	$(GO) run ./loadtest/scalebench -bin $(BIN) -mode cells
	$(GO) run ./loadtest/scalebench -bin $(BIN) -mode directory

.PHONY: fuzz-compile
fuzz-compile: ## Fuzz the compiler with arbitrary source for a minute
	$(GO) test ./cell/compile -run '^$$' -fuzz FuzzCompile -fuzztime 60s

.PHONY: clean
api-client: ## Regenerate the e2e tests' client from the cell's OpenAPI document (deploy/e2e/apiclient, oapi-codegen)
	mkdir -p .run
	go test ./cell/api -count=1 -run TestOpenAPIDocumentIsValid -args -write-openapi30=$(CURDIR)/.run/openapi-3.0.json
	( echo "// Code generated by oapi-codegen from the cell's /openapi-3.0.json (make api-client). DO NOT EDIT."; echo; \
	  go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -generate types,client -package client .run/openapi-3.0.json ) > deploy/e2e/apiclient/client.gen.go
	sha256sum .run/openapi-3.0.json | cut -d' ' -f1 > deploy/e2e/apiclient/openapi-3.0.sha256 # TestClientIsFresh compares

clean: ## Remove binaries (keeps .run data)
	rm -rf $(BIN)

.PHONY: clean-data
clean-data: ## Remove the local deployment's data (.run)
	rm -rf .run
