#!/usr/bin/env bash
# Runs staticcheck, pinned in hack/tools/go.mod, over the main module's own code.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

STATICCHECK="${REPO_ROOT}/_output/bin/staticcheck"
STAMP="${STATICCHECK}.stamp"
want=$(cd hack/tools && go list -m -f '{{.Version}}' honnef.co/go/tools)
if [[ ! -x "${STATICCHECK}" || "$(cat "${STAMP}" 2>/dev/null)" != "${want}" ]]; then
  mkdir -p "$(dirname "${STATICCHECK}")"
  (cd hack/tools && go build -o "${STATICCHECK}" honnef.co/go/tools/cmd/staticcheck)
  echo "${want}" >"${STAMP}"
fi
# pkg/generated is code-generator's output: its use of deprecated client-go
# fields is code-generator's to fix, and nobody here may edit it.
mapfile -t packages < <(go list ./... | grep -v '/pkg/generated/')
"${STATICCHECK}" "${packages[@]}"
