#!/usr/bin/env bash
# Fails when deepcopy functions or pkg/generated are stale: it generates into
# a copy of the tree and compares.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

# Copy the tracked tree (and the untracked files not ignored) so that
# generation runs on exactly what would be committed.
cd "${REPO_ROOT}"
git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -t "${TMP}" 2>/dev/null || true
mkdir -p "${TMP}/_output"
cp -r "${REPO_ROOT}/_output/codegen-bin" "${TMP}/_output/" 2>/dev/null || true

(cd "${TMP}" && hack/update-codegen.sh >/dev/null)

status=0
for dir in pkg/generated pkg/apis; do
  if ! diff -Nru "${REPO_ROOT}/${dir}" "${TMP}/${dir}" >"${TMP}/diff.txt"; then
    echo "${dir} is out of date; run hack/update-codegen.sh (or make update):" >&2
    head -n 50 "${TMP}/diff.txt" >&2
    status=1
  fi
done
exit "${status}"
