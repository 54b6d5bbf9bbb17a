#!/usr/bin/env bash
# Fails when the manifests in artifacts/deploy that hack/update-manifests.sh
# renders from charts/scaleplane differ from what the chart renders now.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

"${REPO_ROOT}/hack/update-manifests.sh" "${TMP}"
status=0
while IFS= read -r -d '' generated; do
  rel="${generated#"${TMP}/"}"
  if ! diff -u "${REPO_ROOT}/${rel}" "${generated}" >"${TMP}/diff.txt" 2>&1; then
    echo "${rel} does not match charts/scaleplane; run hack/update-manifests.sh (or make update):" >&2
    head -n 40 "${TMP}/diff.txt" >&2
    status=1
  fi
done < <(find "${TMP}/artifacts" -type f -print0 | sort -z)
exit "${status}"
