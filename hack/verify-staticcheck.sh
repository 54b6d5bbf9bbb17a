#!/usr/bin/env bash
# Runs staticcheck, pinned in hack/tools/go.mod, over the main module's own code.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

# shellcheck source=lib/init.sh
source "${REPO_ROOT}/hack/lib/init.sh"
"${REPO_ROOT}/hack/install-tools.sh" staticcheck
STATICCHECK="${SCALEPLANE_BIN_DIR}/staticcheck"

# pkg/generated is code-generator's output: its use of deprecated client-go
# fields is code-generator's to fix, and nobody here may edit it.
mapfile -t packages < <(go list ./... | grep -v '/pkg/generated/')
"${STATICCHECK}" "${packages[@]}"
