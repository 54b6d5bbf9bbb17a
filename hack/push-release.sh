#!/usr/bin/env bash
# Publishes a release that `make release` wrote: pushes its images, its chart
# (as an OCI artifact) and cosign's signatures and attestations of them to a
# registry, each by the digest the release recorded (`make push-release
# REGISTRY=ghcr.io/scaleplane`; docs/releasing.md).
#
#   REGISTRY/scaleplane-controller-manager:vX.Y.Z, REGISTRY/scaleplane-webhook:vX.Y.Z
#   REGISTRY/charts/scaleplane:X.Y.Z    helm install oci://REGISTRY/charts/scaleplane --version X.Y.Z
#   REGISTRY/<repository>:sha256-<digest>.sig and .att   where cosign finds them
#
# The chart runs the images at the registry the release was built for
# (SCALEPLANE_IMAGE_REGISTRY, in images.txt); pushing to another one is a
# mirror, and the chart then needs --set *.image.repository (the digests stay).
# Credentials are docker's (docker login, crane auth login: ~/.docker/config.json).
#
# Usage: hack/push-release.sh REGISTRY [RELEASE_DIR]   (default _output/release)

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

PREFIX="${1:-${REGISTRY:-}}"
DIR="${2:-${SCALEPLANE_ROOT}/_output/release}"
IMAGETOOL="${SCALEPLANE_BIN_DIR}/imagetool"
[[ -n "${PREFIX}" ]] || scaleplane::fatal "usage: make push-release REGISTRY=host[:port]/path"
[[ -f "${DIR}/images.txt" && -f "${DIR}/SHA256SUMS" ]] ||
  scaleplane::fatal "${DIR} holds no release (no images.txt or SHA256SUMS): make release VERSION=vX.Y.Z first"
(cd "${DIR}" && sha256sum --check --quiet SHA256SUMS) ||
  scaleplane::fatal "${DIR}: a file does not match SHA256SUMS; not pushing it"
[[ -f "${DIR}/signatures.oci.tar" ]] ||
  scaleplane::log "WARNING: ${DIR} has no signatures.oci.tar (an unsigned release): pushing images and chart only"

hack/install-tools.sh imagetool >/dev/null

# images.txt: REPOSITORY/NAME:VERSION@sha256:DIGEST per image.
while read -r line; do
  ref="${line%@*}" digest="${line#*@}"
  name="${ref##*/}" name="${name%:*}" version="${ref##*:}"
  [[ "${ref%/*}" == "${PREFIX}" ]] ||
    scaleplane::log "WARNING: the release's chart runs ${ref%/*}/${name}; pushing a mirror to ${PREFIX}"
  got="$("${IMAGETOOL}" push --archive "${DIR}/${name}.oci.tar" --reference "${PREFIX}/${name}:${version}")"
  [[ "${got}" == *"@${digest}" ]] || scaleplane::fatal "pushed ${got}, want ${digest}"
  echo "${got}"
done <"${DIR}/images.txt"

chart="$(cd "${DIR}" && ls scaleplane-*.chart.oci.tar)"
chart_version="${chart#scaleplane-}" chart_version="${chart_version%.chart.oci.tar}"
"${IMAGETOOL}" push --archive "${DIR}/${chart}" --reference "${PREFIX}/charts/scaleplane:${chart_version}"

if [[ -f "${DIR}/signatures.oci.tar" ]]; then
  "${IMAGETOOL}" push --archive "${DIR}/signatures.oci.tar" --prefix "${PREFIX}" >/dev/null
  scaleplane::log "signatures and attestations pushed"
fi
scaleplane::log "helm install scaleplane oci://${PREFIX}/charts/scaleplane --version ${chart_version}"
