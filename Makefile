# scaleplane build entry points. Every target is a thin wrapper over a script in
# hack/ so that CI, developers and the README all run the same thing.

SHELL := /usr/bin/env bash
OUTPUT_DIR ?= _output
BIN_DIR := $(OUTPUT_DIR)/bin
GO ?= go

.PHONY: all
all: build

## build: build scaleplane-controller-manager, scaleplane-webhook and the kubectl plugin kubectl-scaleplane into _output/bin
.PHONY: build
build:
	@mkdir -p $(BIN_DIR)
	$(GO) build -o $(BIN_DIR)/scaleplane-controller-manager ./cmd/controller-manager
	$(GO) build -o $(BIN_DIR)/scaleplane-webhook ./cmd/webhook
	$(GO) build -o $(BIN_DIR)/kubectl-scaleplane ./cmd/kubectl-scaleplane

## tools: install what a fresh machine lacks (etcd, kube-apiserver, controller-gen, ...) into _output/bin
.PHONY: tools
tools:
	hack/install-tools.sh

## update: run every generator (deepcopy, clients, listers, informers, CRDs, artifacts/deploy from the chart) and gofmt
.PHONY: update
update:
	hack/update-codegen.sh
	hack/update-crdgen.sh
	hack/update-manifests.sh
	gofmt -s -w $$(git ls-files '*.go' | grep -v '^pkg/generated/')

## verify: fail when generated code, CRDs or artifacts/deploy are stale, or gofmt / go vet / staticcheck / actionlint complain
.PHONY: verify
verify:
	hack/verify-codegen.sh
	hack/verify-crdgen.sh
	hack/verify-manifests.sh
	hack/verify-gofmt.sh
	$(GO) vet ./...
	hack/verify-staticcheck.sh
	hack/verify-chart.sh
	hack/verify-workflows.sh

## images: OCI image tarballs of both binaries (linux/amd64 and linux/arm64) in _output/images, no container runtime needed
.PHONY: images
images:
	hack/build-images.sh

## release: cut release VERSION=vX.Y.Z into _output/release, offline and reproducibly: images (linux/amd64, linux/arm64), plugin archives and krew manifest, the chart pinned by digest, release notes from CHANGELOG.md, SHA256SUMS (docs/releasing.md)
.PHONY: release
release:
	hack/release.sh $(VERSION)

## push-release: push the release in _output/release (images, the chart as an OCI artifact, signatures and attestations) to REGISTRY=host[:port]/path, each by its digest (docs/releasing.md)
.PHONY: push-release
push-release:
	hack/push-release.sh $(REGISTRY)

## verify-release: build the whole release twice from two clean clones of HEAD and compare every file (the version: the newest in CHANGELOG.md); make test runs its short form
.PHONY: verify-release
verify-release:
	hack/verify-release-reproducible.sh $(VERSION)

# The integration tests (test/integration/images) run the images of this
# host's architecture only: cross-compiling the others costs about 2 more
# minutes on a cold 2-core machine, and `make images` builds them.
HOST_IMAGE_PLATFORM = linux/$(shell $(GO) env GOARCH)

## test-unit: unit tests only (fake clientsets, fake clock)
.PHONY: test-unit
test-unit:
	hack/test-unit.sh

# The tests need only these of the tools (and the scaleplane binaries, which
# some of them run): the integration tests the control plane, helm and kwok;
# the unit tests promtool (the chart's alerting rules); the release's
# checks cyclonedx-gomod (SBOMs), and test/integration/release cosign and
# imagetool (a signed release, installed from a registry). Building just
# them keeps a cold `make test` (CI) inside its time budget.
TEST_TOOLS := etcd kube-apiserver kube-controller-manager kubectl helm kwok metrics-server promtool imagetool cyclonedx-gomod cosign

## test-integration: tests against a real etcd + kube-apiserver
.PHONY: test-integration
test-integration: build
	hack/install-tools.sh $(TEST_TOOLS)
	SCALEPLANE_IMAGE_PLATFORMS=$(HOST_IMAGE_PLATFORM) hack/build-images.sh
	hack/test-integration.sh

# test's hack/verify-release-reproducible.sh --short releases this host's
# linux images and plugin archive and the chart twice, from two clean clones,
# and compares every byte. Right after the image step, whose Go build cache
# it shares, it mostly links: 34 s on a 2-core machine whose build cache was
# empty before that step (which took 158 s). The whole double release, with
# the arm64, darwin and windows cross-builds, is `make verify-release`.
## test: everything CI runs: verify (generated code, CRDs, manifests, chart, linters), unit tests, the release's reproducibility for this host's platform, integration tests (with this host's images)
.PHONY: test
test: verify build
	hack/install-tools.sh $(TEST_TOOLS)
	hack/test-unit.sh
	SCALEPLANE_IMAGE_PLATFORMS=$(HOST_IMAGE_PLATFORM) hack/build-images.sh
	hack/verify-release-reproducible.sh --short
	hack/test-integration.sh

## test-reliability: the full chaos test (about 15 minutes): three controller-manager replicas, the leader killed every 20-60 s, kube-apiserver restarted twice and etcd once
.PHONY: test-reliability
test-reliability: build
	hack/install-tools.sh etcd kube-apiserver
	SCALEPLANE_CHAOS_LONG=1 $(GO) test -tags=reliability_long -count=1 -v -timeout=40m ./test/reliability/...

## local-up: start a whole local control plane with scaleplane running and the examples applied
.PHONY: local-up
local-up: tools build
	hack/local-up.sh

## local-down: stop every process local-up started
.PHONY: local-down
local-down:
	hack/local-down.sh

.PHONY: clean
clean:
	rm -rf $(OUTPUT_DIR)

.PHONY: help
help:
	@grep -E '^## ' Makefile | sed 's/^## //'
