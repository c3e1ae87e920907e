# kobe — run it with `make dev`, test it with `make test`.
# Needs only Go (see go.mod for the version); everything else is built or started by these targets.

SHELL := /bin/bash
GO ?= go
VERSION ?= v0.1.0
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/kunobi-ninja/kobe/internal/buildinfo.Version=$(VERSION) \
           -X github.com/kunobi-ninja/kobe/internal/buildinfo.Commit=$(COMMIT)
# Flags for `make dev`, e.g. make dev ARGS="--ephemeral"
ARGS ?=
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -count=1 -timeout 30m

.PHONY: all build dev test test-short bench soak fuzz lint tools generate postgres-check postgres clean help images

all: build

help:
	@echo "make dev         run kobe: embedded Temporal + Web UI, worker, API and store (ARGS=... for flags)"
	@echo "make test        the whole test suite (needs PostgreSQL on 127.0.0.1:5432 or KOBE_TEST_POSTGRES)"
	@echo "make test-short  fast tests only (no PostgreSQL, no real binary)"
	@echo "make soak        fault-injection soak: kill -9 worker/API/Temporal under lease load, then check invariants (~15 min; SOAK_ARGS=...)"
	@echo "make bench       benchmarks, printing their figures"
	@echo "make fuzz        search for new inputs with the fuzz targets, FUZZTIME each (make test runs their seed corpora)"
	@echo "make lint        gofmt, go vet, staticcheck and workflowcheck (the linters built once into \$$KOBE_TOOLS_DIR)"
	@echo "make generate    the CRDs of kobe's resources (deploy/crds) and their Go types' deep copies, with controller-gen"
	@echo "make build       bin/kobe"
	@echo "make images      kobe's container image as an OCI layout and a ctr/docker-loadable archive in \$$IMAGES_DIR (build/images), no Docker needed"
	@echo "make tools       build kube-apiserver, etcd, kine, kwok, kubelet, containerd, the Cluster API managers, the vcluster syncer… into \$$KOBE_TOOLS_DIR or .cache/tools (cached by version)"
	@echo "make postgres    install and start Debian's PostgreSQL for the tests (root; what CI does)"

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/kobe ./cmd/kobe

# kobe's container image (hack/image; docs/production.md, "The image"): a static build of the
# binary with the same VERSION and COMMIT, the vcluster chart (hack/build-vcluster-tools.sh
# chart: copied from the Go module cache, no syncer build) and the build machine's CA bundle,
# written as build/images/kobe-$(VERSION).oci (OCI layout) and kobe-$(VERSION).tar (for
# `ctr images import`, `docker load`).
IMAGES_DIR ?= build/images
IMAGE_REPOSITORY ?= ghcr.io/kunobi-ninja/kobe
images:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGES_DIR)/kobe ./cmd/kobe
	chart=$$(hack/build-vcluster-tools.sh chart) && \
	  $(GO) run ./hack/image -binary $(IMAGES_DIR)/kobe -version $(VERSION) -revision $(COMMIT) \
	    -repository $(IMAGE_REPOSITORY) -vcluster-chart "$$chart" -out $(IMAGES_DIR)

dev: build tools
	./bin/kobe dev $(ARGS)

# Tests: the whole suite with the race detector (hack/test.sh: two lanes at once, then the soak
# and the 50-lease burst alone). The suite starts real Temporal servers, real stores, real
# clusters and the real binary; PostgreSQL must be reachable (see `make postgres`). Each part
# runs under hack/timed.sh, which records its duration when KOBE_STAGE_TIMES names a file
# (.ci/run prints them). hack/test.sh builds the tools too (`make tools`, in the background), and
# starts each part of the suite as soon as the tools it needs are there.
test: postgres-check
	GO=$(GO) MAKE=$(MAKE) hack/test.sh

# Each fuzz target for a bounded number of executions (FUZZTIME); a crash or a 5xx fails the run
# and leaves the input under testdata/fuzz for a regression test. A count, not a duration: with a
# duration, Go 1.26's fuzz coordinator can report a spurious "context deadline exceeded" when the
# deadline lands while a worker is mid-call (golang/go#75804, fixed in Go 1.27) — CI hit it.
FUZZTIME ?= 8000x
fuzz:
	@for f in FuzzLeaseCreate FuzzLeaseExtend FuzzPoolManifest; do \
	  echo "fuzz $$f for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -parallel 2 ./server/ || exit 1; \
	done

# The fault-injection soak (testsuite/soak): lease lifecycles from concurrent clients while the
# worker, the API server and the embedded Temporal server are killed -9 and restarted, clusters
# break while being created, and a share of requests is invalid; then every invariant is checked.
# `make test` runs its short variant (the package's default flags, about a minute of load).
SOAK_ARGS ?= -soak.duration=10m -soak.lifecycles=2000 -soak.clients=8 -soak.principals=3 -soak.warm=4 -soak.max-clusters=8 -soak.fault-every=20s -soak.report=$(CURDIR)/soak.json
soak: postgres-check tools
	KOBE_TEST_REQUIRE_POSTGRES=1 $(GO) test -count=1 -timeout 60m -run '^TestSoak$$' -v ./testsuite/soak/ -args $(SOAK_ARGS)

test-short:
	$(GO) test -short -count=1 ./...

# The benchmark program (testsuite/bench, docs/performance.md): the real `kobe dev` with the local
# backend, everything in one run so the ratios hold on a noisy machine; a table on stdout, the
# figures as JSON in BENCH_OUT. About 10 minutes on 2 cores with the defaults. Smaller, e.g.:
# make bench BENCH_ARGS="-clients 1,2 -rounds 1 -lifecycles 2 -lifecycle-clients 2 -cold 1 -floor 20"
BENCH_OUT ?= bench.json
BENCH_ARGS ?=
bench: build tools
	$(GO) run ./testsuite/bench/cmd/kobe-bench -kobe bin/kobe -out $(BENCH_OUT) $(BENCH_ARGS)

# The packages' Go benchmarks (store writes on both drivers, doctor through the API, kobe dev
# start-up, local instance create/delete): `go test -bench`, in the usual benchmark table.
.PHONY: bench-go
bench-go: postgres-check tools
	$(GO) test $(BENCH_FLAGS) ./...

# gofmt, go vet, staticcheck (its defaults, staticcheck.conf) and Temporal's workflowcheck
# (determinism of every workflow: a map iterated where the order does not matter carries a
# `//workflowcheck:ignore <why>` on the line before); the linters are built once into $KOBE_TOOLS_DIR.
# The analyses load the packages built with -race, as `make test` builds them, so that the two
# share one compile of every dependency in the build cache: on a cold machine a second one,
# without -race, took 8 minutes of both cores in CI (3 December 2026). The linters themselves
# are built without it.
LINT_GOFLAGS := $(strip $(GOFLAGS) -race)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	GOFLAGS="$(LINT_GOFLAGS)" $(GO) vet ./...
	@hack/build-lint-tools.sh
	@. "$${KOBE_TOOLS_DIR:-$(CURDIR)/.cache/tools}/lint.env" && export GOFLAGS="$(LINT_GOFLAGS)" && \
	  echo "staticcheck ./..." && "$$STATICCHECK" ./... && \
	  echo "workflowcheck ./..." && "$$WORKFLOWCHECK" ./...

# The control-plane tools, then at once the parts of a real node (kubelet, kube-proxy, containerd,
# CoreDNS; runc, CNI plugins and busybox come from Debian: see .ci/run), the Cluster API managers
# and the vcluster syncer, beside k3s (hack/build-all-tools.sh).
tools:
	hack/build-all-tools.sh

# controller-gen (hack/build-controller-gen.sh, built into $KOBE_TOOLS_DIR) on kobe's Kubernetes
# resources (resources/...): their deep copies beside the types, their CRDs in deploy/crds.
# TestGeneratedFilesMatchTheTypes (make test) fails when the committed files are not what this makes.
generate:
	hack/generate.sh

# Says clearly what `make test` needs instead of failing deep inside a test.
postgres-check:
	@hack/postgres.sh check

postgres:
	hack/postgres.sh ensure

clean:
	rm -rf bin build
