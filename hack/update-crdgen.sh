#!/usr/bin/env bash
# Generates the CustomResourceDefinitions in artifacts/deploy/crds from the
# kubebuilder markers of the API types, with the controller-gen pinned in
# hack/tools/go.mod.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${REPO_ROOT}"

# shellcheck source=lib/init.sh
source "${REPO_ROOT}/hack/lib/init.sh"
"${REPO_ROOT}/hack/install-tools.sh" controller-gen
CONTROLLER_GEN="${SCALEPLANE_BIN_DIR}/controller-gen"

OUTPUT_DIR="${CRD_OUTPUT_DIR:-${REPO_ROOT}/artifacts/deploy/crds}"
# The Helm chart ships the same CRDs in its crds/ directory.
CHART_DIR="${CHART_CRD_OUTPUT_DIR:-${REPO_ROOT}/charts/scaleplane/crds}"
mkdir -p "${OUTPUT_DIR}" "${CHART_DIR}"
rm -f "${OUTPUT_DIR}"/*.yaml "${CHART_DIR}"/*.yaml

# LeaderWorkerSet embeds two pod templates; its schema goes without
# descriptions to stay well under etcd's object size limit. It is still larger
# than client-side apply's 256 KiB annotation limit: apply it with
# `kubectl apply --server-side`. The other groups keep their descriptions for
# kubectl explain. generateEmbeddedObjectMeta keeps the pod templates'
# metadata (labels, annotations) in the schema, as upstream LWS's CRD does;
# without it the apiserver rejects every real LeaderWorkerSet (strict decoding:
# unknown field "metadata.labels").
"${CONTROLLER_GEN}" crd:crdVersions=v1 \
  paths=./pkg/apis/autoscaling/... paths=./pkg/apis/scaleplane/... \
  output:crd:dir="${OUTPUT_DIR}"
"${CONTROLLER_GEN}" crd:crdVersions=v1,maxDescLen=0,generateEmbeddedObjectMeta=true \
  paths=./pkg/apis/leaderworkerset/... \
  output:crd:dir="${OUTPUT_DIR}"
cp "${OUTPUT_DIR}"/*.yaml "${CHART_DIR}"/
