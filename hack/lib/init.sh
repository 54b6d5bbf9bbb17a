#!/usr/bin/env bash
# Shared setup for the scripts in hack/: where the repository and the built
# tools live, and small logging helpers. Source it; do not run it.

SCALEPLANE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
# SCALEPLANE_BIN_DIR lets a machine keep the (slow to build) control plane
# binaries outside the clone; the Go test framework honours the same variable.
SCALEPLANE_BIN_DIR="${SCALEPLANE_BIN_DIR:-${SCALEPLANE_ROOT}/_output/bin}"
export SCALEPLANE_ROOT SCALEPLANE_BIN_DIR

scaleplane::log() {
  echo "+++ [$(date +'%H:%M:%S')] $*" >&2
}

scaleplane::fatal() {
  echo "!!! [$(date +'%H:%M:%S')] $*" >&2
  exit 1
}
