#!/usr/bin/env bash
# Runs scaleplane's integration tests: each package under test/integration
# starts its own etcd and kube-apiserver (and kube-controller-manager when it
# asks for one) from _output/bin, built by hack/install-tools.sh (`make tools`).
# A missing binary fails the tests with a message saying so; nothing skips.
#
# Extra arguments go to `go test`, e.g. hack/test-integration.sh -run TestScale.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

# -count=1: these tests exercise processes outside Go's view, so a cached
# "ok" would prove nothing. -v: the output shows which tests really ran.
# -p: every package runs its own control plane, and most of their time is
# spent waiting for controllers and cron slots, not computing; running a few
# packages at once overlaps the waits (on 2 cores: about 2 minutes saved).
# Override with SCALEPLANE_INTEGRATION_PARALLEL=1 to run them one by one.
parallel="${SCALEPLANE_INTEGRATION_PARALLEL:-3}"
scaleplane::log "integration tests, ${parallel} packages at a time (binaries from ${SCALEPLANE_BIN_DIR})"
# ./test/reliability is the chaos test's short form (about 3 minutes, most
# of it waiting for cron slots and failovers); `make test-reliability` runs
# the long one.
go test -count=1 -v -p="${parallel}" -timeout=20m "$@" ./test/integration/... ./test/reliability/...
