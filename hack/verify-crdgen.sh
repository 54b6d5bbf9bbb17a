#!/usr/bin/env bash
# Fails when the CRDs in artifacts/deploy/crds do not match the API types.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

mkdir -p "${TMP}/artifacts" "${TMP}/chart"
CRD_OUTPUT_DIR="${TMP}/artifacts" CHART_CRD_OUTPUT_DIR="${TMP}/chart" "${REPO_ROOT}/hack/update-crdgen.sh"
status=0
for pair in "artifacts/deploy/crds:${TMP}/artifacts" "charts/scaleplane/crds:${TMP}/chart"; do
  dir="${pair%%:*}" generated="${pair#*:}"
  if ! diff -Nru "${REPO_ROOT}/${dir}" "${generated}" >"${TMP}/diff.txt"; then
    echo "${dir} is out of date; run hack/update-crdgen.sh (or make update):" >&2
    head -n 50 "${TMP}/diff.txt" >&2
    status=1
  fi
done
exit "${status}"
