#!/usr/bin/env bash
# Generates the CustomResourceDefinitions in artifacts/deploy/crds from the
# kubebuilder markers of the API types, with the controller-gen pinned in
# hack/tools/go.mod.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

CONTROLLER_GEN="${REPO_ROOT}/_output/bin/controller-gen"
STAMP="${CONTROLLER_GEN}.stamp"
want=$(cd hack/tools && go list -m -f '{{.Version}}' sigs.k8s.io/controller-tools)
if [[ ! -x "${CONTROLLER_GEN}" || "$(cat "${STAMP}" 2>/dev/null)" != "${want}" ]]; then
  mkdir -p "$(dirname "${CONTROLLER_GEN}")"
  (cd hack/tools && go build -o "${CONTROLLER_GEN}" sigs.k8s.io/controller-tools/cmd/controller-gen)
  echo "${want}" >"${STAMP}"
fi

OUTPUT_DIR="${CRD_OUTPUT_DIR:-${REPO_ROOT}/artifacts/deploy/crds}"
mkdir -p "${OUTPUT_DIR}"
rm -f "${OUTPUT_DIR}"/*.yaml

# LeaderWorkerSet embeds two pod templates; without descriptions its schema
# stays small enough for client-side apply (the 256 KiB annotation limit).
# The other groups keep their descriptions for kubectl explain.
"${CONTROLLER_GEN}" crd:crdVersions=v1 \
  paths=./pkg/apis/autoscaling/... paths=./pkg/apis/scaleplane/... \
  output:crd:dir="${OUTPUT_DIR}"
"${CONTROLLER_GEN}" crd:crdVersions=v1,maxDescLen=0 \
  paths=./pkg/apis/leaderworkerset/... \
  output:crd:dir="${OUTPUT_DIR}"
