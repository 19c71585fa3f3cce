# keyledger: `make help` lists every target.
include versions.env

SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# What `keyledger version` says was built (hack/stamp.sh: the commit, its
# time in UTC, whether the tree differs from it).
STAMP := $(shell bash hack/stamp.sh)
LDFLAGS := -s -w -X github.com/keyledger/keyledger/cmd/keyledger/app.Version=$(VERSION) $(STAMP)
# Tests talk to loopback only: testcontainers must not dial the default
# gateway (these machines look like containers to it), and Ryuk has no image.
export TESTCONTAINERS_HOST_OVERRIDE := 127.0.0.1
export TESTCONTAINERS_RYUK_DISABLED := true
# Integration tests may take a while on 2 cores the first time.
TEST_TIMEOUT ?= 40m
# The integration tests wait on the API server, PostgreSQL and pods more
# than on the CPU: four at a time instead of GOMAXPROCS (2 here). The
# non-node tests took 295 s at 4 against 541 s at 2 (docs/testing.md; the
# run at 2 shared the machine with one other build).
TEST_PARALLEL ?= 4

.PHONY: help
help: ## List targets with one line each.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/keyledger (static, version stamped).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/keyledger ./cmd/keyledger

.PHONY: image
image: build ## Build the image $(KEYLEDGER_IMAGE) of versions.env FROM scratch (static binary, CA bundle, UID 10001) and print its size.
	bash hack/docker.sh
	VERSION=$(VERSION) IMAGE=$(KEYLEDGER_IMAGE) bash hack/image.sh

# The release: what a user pins. DIST is where the binaries go.
DIST ?= dist

.PHONY: release-binaries
release-binaries: ## Static linux/amd64 and linux/arm64 binaries in $(DIST)/ with SHA256SUMS (cross-compiled, offline).
	DIST=$(DIST) VERSION=$(VERSION) bash hack/release.sh

.PHONY: release
release: release-binaries ## release-binaries, then the image $(KEYLEDGER_IMAGE) of versions.env holding $(DIST)/keyledger-linux-amd64.
	bash hack/docker.sh
	VERSION=$(VERSION) IMAGE=$(KEYLEDGER_IMAGE) BINARY=$(DIST)/keyledger-linux-amd64 CONTEXT=$(DIST)/image bash hack/image.sh

.PHONY: demo-platform
demo-platform: ## Only what `make demo` uses: Docker engine, the control-plane binaries and the PostgreSQL image (the node, the server images and the operators are built by the targets that need them).
	bash hack/demo-platform.sh

.PHONY: platform
platform: demo-platform ## Install and start what tests need: Docker engine, control-plane and node binaries, PostgreSQL and server images, the operators (KEYLEDGER_OPERATORS=off skips them), Argo CD (KEYLEDGER_ARGOCD=off skips it).
	bash hack/deps.sh
	if [ "$${KEYLEDGER_NODE:-}" != off ]; then bash hack/node.sh >/dev/null && bash hack/servers-image.sh >/dev/null; fi
	if [ "$${KEYLEDGER_OPERATORS:-}" != off ]; then bash hack/operators.sh external-secrets >/dev/null; fi
	if [ "$${KEYLEDGER_OPERATORS:-}" != off ] && [ "$${KEYLEDGER_NODE:-}" != off ]; then bash hack/operators-images.sh >/dev/null; fi
	if [ "$${KEYLEDGER_ARGOCD:-}" != off ] && [ "$${KEYLEDGER_OPERATORS:-}" != off ] && [ "$${KEYLEDGER_NODE:-}" != off ]; then bash hack/argocd.sh >/dev/null; fi

.PHONY: vet
vet: lint ## go vet, gofmt check and golangci-lint (.golangci.yml).
	$(GO) vet ./...
	$(GO) vet -tags failpoints ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# golangci-lint at the versions.env pin, built from the Go module proxy into a
# cache directory shared by every clone; installed once per version.
TOOLS_DIR ?= $(HOME)/.cache/keyledger/tools
GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-v$(GOLANGCI_LINT_VERSION)

$(GOLANGCI_LINT):
	mkdir -p $(TOOLS_DIR)/.build-v$(GOLANGCI_LINT_VERSION)
	GOBIN=$(TOOLS_DIR)/.build-v$(GOLANGCI_LINT_VERSION) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS_DIR)/.build-v$(GOLANGCI_LINT_VERSION)/golangci-lint $@
	rmdir $(TOOLS_DIR)/.build-v$(GOLANGCI_LINT_VERSION)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint with .golangci.yml (installs the pinned version on first use).
	$(GOLANGCI_LINT) run ./...

.PHONY: unit
unit: ## Unit tests only (seconds; no Docker, no control plane).
	$(GO) test -short -count=1 ./...

.PHONY: cover
cover: ## Coverage of each family's Decide, Resolve and decision files by the fast unit tests (fails below 90%), and their wall time.
	bash hack/decision-coverage.sh

.PHONY: integration
integration: platform ## Integration tests on the real control plane and PostgreSQL.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) -tags failpoints ./integration/...

.PHONY: test
test: platform vet cover ## Everything: vet, decision coverage, unit and integration tests on the real platform.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -parallel $(TEST_PARALLEL) -tags failpoints ./...

# The long seeded fault soak (make test runs a small one: 45 operations).
SOAK_OPS ?= 300
SOAK_SEED ?=

.PHONY: soak
soak: demo-platform ## Seeded fault soak: SOAK_OPS operations (default 300) of the three families under random kills, duplicates, PostgreSQL and API server crashes, restarts and pauses, checked from etcd's history and the journal. SOAK_SEED=N replays a run.
	SOAK_OPS=$(SOAK_OPS) SOAK_SEED=$(SOAK_SEED) KEYLEDGER_NODE=off KEYLEDGER_OPERATORS=off \
		$(GO) test -count=1 -timeout 90m -tags failpoints -run '^TestIntegrationSoak$$' -v ./integration/

.PHONY: race
race: platform ## Unit and integration tests, with the tests and the keyledger binary built with the race detector.
	KEYLEDGER_TEST_RACE=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -tags failpoints ./...

.PHONY: docs
docs: ## Regenerate docs/cli.md from the command tree (a unit test fails when it is stale).
	$(GO) generate ./cmd/keyledger/app

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s).
	$(GO) test ./workflow/command/ -run '^$$' -fuzz '^FuzzDecodeStrict$$' -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./workflow/command/ -run '^$$' -fuzz '^FuzzDecodersAgree$$' -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./workflow/retire/keyring/ -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $${FUZZTIME:-30s}
	$(GO) test ./workflow/credentials/ -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $${FUZZTIME:-30s}

.PHONY: demo
demo: demo-platform ## Bring up the local platform and walk through the three families (plan, run, replay, refusal, recreate, restore, history) and the journal.
	$(GO) run ./integration/demo

.PHONY: bench
bench: platform ## Benchmarks (retirement, 64-Secret credential plan, versioned update at the retention limit, 1/8/32 concurrent runs on one journal, a burst of 50 and 200 namespaces on one journal (directly and through a session pooler), a journal of 100,000 operations or KEYLEDGER_BENCH_JOURNAL_OPS, the per-statement append guard against migration 10): medians and ratios against baselines measured in the same run.
	set -o pipefail; KEYLEDGER_BENCH=1 $(GO) test -count=1 -timeout 30m -tags failpoints -run '^TestBench' -v ./integration/bench/ 2>&1 | grep -E '^(BENCH|---|ok|FAIL|PASS)|bench_[a-z_]*test'

.PHONY: clean
clean: ## Remove build output (cached control-plane binaries and images stay).
	rm -rf bin dist
