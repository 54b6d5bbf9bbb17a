#!/usr/bin/env bash
# Generates deepcopy functions, the typed clientset (with watch), listers and
# informers for the API types in pkg/apis, with k8s.io/code-generator's
# kube_codegen.sh at the version pinned in hack/tools/go.mod.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

CODEGEN_PKG=$(cd hack/tools && go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
  (cd hack/tools && go mod download k8s.io/code-generator)
  CODEGEN_PKG=$(cd hack/tools && go list -m -f '{{.Dir}}' k8s.io/code-generator)
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

# kube_codegen installs its generators with "go install"; keep them out of the
# user's GOBIN and build them from the pinned module.
export GOBIN="${REPO_ROOT}/_output/codegen-bin"
mkdir -p "${GOBIN}"

BOILERPLATE="${REPO_ROOT}/hack/boilerplate.go.txt"
OUTPUT_DIR="${GENERATED_OUTPUT_DIR:-${REPO_ROOT}/pkg/generated}"

kube::codegen::gen_helpers \
  --boilerplate "${BOILERPLATE}" \
  "${REPO_ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --output-dir "${OUTPUT_DIR}" \
  --output-pkg github.com/scaleplane/scaleplane/pkg/generated \
  --boilerplate "${BOILERPLATE}" \
  "${REPO_ROOT}/pkg/apis"
