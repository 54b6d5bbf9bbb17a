#!/usr/bin/env bash
# Fails when the CRDs in artifacts/deploy/crds do not match the API types.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

CRD_OUTPUT_DIR="${TMP}" "${REPO_ROOT}/hack/update-crdgen.sh"
if ! diff -Nru "${REPO_ROOT}/artifacts/deploy/crds" "${TMP}" >"${TMP}.diff"; then
  echo "artifacts/deploy/crds is out of date; run hack/update-crdgen.sh (or make update):" >&2
  head -n 50 "${TMP}.diff" >&2
  rm -f "${TMP}.diff"
  exit 1
fi
rm -f "${TMP}.diff"
