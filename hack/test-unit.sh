#!/usr/bin/env bash
# Runs scaleplane's unit tests: every package under cmd/ and pkg/, the
# benchmarks' helpers under test/bench/internal, the checks of the Karmada
# guides (test/guides) and of the Go files' style (test/style: no
# non-generated Go file over 550 lines), imagetool's (hack/tools/images),
# and promtool's tests of the chart's alerting rules. They use
# fake clientsets and fake clocks only; the integration tests against a real
# apiserver are in test/integration and run by hack/test-integration.sh.
#
# Extra arguments go to `go test`, e.g. hack/test-unit.sh -run TestSync -v.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

# The race detector needs cgo and a C compiler; on a machine without one the
# tests still run, and say so. SCALEPLANE_RACE=false turns it off: .ci/run
# does, because on a cold 2-core machine the race-instrumented rebuild of every
# dependency costs about 4 of the 30 minutes CI may take.
race=()
if [[ "${SCALEPLANE_RACE:-true}" != "true" ]]; then
  scaleplane::log "SCALEPLANE_RACE=${SCALEPLANE_RACE}: running unit tests WITHOUT -race"
elif [[ "$(go env CGO_ENABLED)" == "1" ]] && command -v "$(go env CC)" >/dev/null 2>&1; then
  race=(-race)
else
  scaleplane::log "no C compiler for cgo: running unit tests WITHOUT -race"
fi

# go list expands the patterns once, so a tree without any package under one
# of them is not an error, and nothing else under test/ sneaks in: the
# benchmarks' helpers (test/bench/internal) have unit tests of their own,
# which run here; the benchmarks themselves do not. test/guides and
# test/style read the checkout, without a cluster.
mapfile -t packages < <({ go list ./cmd/... ./pkg/... | grep -v '/test/'; go list ./test/bench/internal/... ./test/guides/... ./test/style/...; } || true)
if (( ${#packages[@]} == 0 )); then
  scaleplane::fatal "no Go packages under cmd/ or pkg/"
fi

scaleplane::log "unit tests: ${#packages[@]} packages ${race[*]}"
go test "${race[@]}" -timeout=10m "$@" "${packages[@]}"

# imagetool (hack/tools/images, a module of its own, so neither the go test
# above nor `make verify`'s go vet reaches it): its vet and unit tests, the
# release's archives among them. CGO_ENABLED=0 as hack/install-tools.sh
# builds it, so the packages compiled here are the ones it reuses.
scaleplane::log "imagetool: go vet and unit tests (hack/tools/images)"
(cd hack/tools/images && CGO_ENABLED=0 GOWORK=off go vet ./... && CGO_ENABLED=0 GOWORK=off go test -timeout=5m ./...)

# The chart's alerting rules: promtool checks them and runs their unit tests
# (every alert fires in one case and stays quiet in another). promtool is
# built from the version pinned in hack/tools/prometheus (a second or so when
# it is up to date; `make test` builds it with the other test tools first).
"${SCALEPLANE_ROOT}/hack/install-tools.sh" promtool
scaleplane::log "promtool: check and test charts/scaleplane/files/prometheus-rules.yaml"
"${SCALEPLANE_BIN_DIR}/promtool" check rules charts/scaleplane/files/prometheus-rules.yaml
"${SCALEPLANE_BIN_DIR}/promtool" test rules test/prometheus/alerts_test.yaml

# Webhook: a short fuzz run of the promise that every schedule the webhook
# admits is one the cron-scaler runs, and that fires within four years. Only
# when the caller did not narrow the run (e.g. with -run): the fuzz target
# always runs its seed corpus as part of the tests above anyway.
if (( $# == 0 )); then
  scaleplane::log "fuzz: FuzzScheduleAcceptedRuns for 20s"
  go test ./pkg/webhook/cronfederatedhpa -run '^$' -fuzz FuzzScheduleAcceptedRuns -fuzztime 20s
fi
