#!/usr/bin/env bash
# Builds the OCI images of scaleplane-controller-manager and scaleplane-webhook
# into _output/images/<name>.tar, without a container runtime and without
# pulling a base image: static binaries (CGO_ENABLED=0, -trimpath) on an empty
# base with a CA bundle and a non-root user (65532), assembled by imagetool
# (hack/tools/images). Each tarball is an OCI image layout holding one
# multi-platform index, named <repository>:<tag> for `docker load`,
# `podman load`, `ctr images import`, `kind load image-archive` or
# `skopeo copy oci-archive:...`.
#
# The repository and tag are the ones charts/scaleplane (and the manifests
# rendered from it) run: ghcr.io/scaleplane/<name> and the chart's appVersion;
# test/integration/images checks that they agree.
#
# Environment:
#   SCALEPLANE_IMAGE_PLATFORMS  comma-separated os/arch list (default linux/amd64,linux/arm64)
#   SCALEPLANE_IMAGE_REGISTRY   repository prefix (default ghcr.io/scaleplane)
#   SCALEPLANE_IMAGE_TAG        tag (default: appVersion in charts/scaleplane/Chart.yaml)
#   SCALEPLANE_IMAGE_OUTPUT_DIR where the tarballs (and the binaries, in bin/) go (default _output/images)
#   SOURCE_DATE_EPOCH           file and config times, and the org.opencontainers.image.created
#                               label (default: the time of the HEAD commit, 0 outside git), so
#                               that the same commit always gives the same images
#
# hack/release.sh builds a release's images with this script (the tag is the
# release's version); docs/releasing.md says what makes them reproducible.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

PLATFORMS="${SCALEPLANE_IMAGE_PLATFORMS:-linux/amd64,linux/arm64}"
REGISTRY="${SCALEPLANE_IMAGE_REGISTRY:-ghcr.io/scaleplane}"
OUT_DIR="${SCALEPLANE_IMAGE_OUTPUT_DIR:-${SCALEPLANE_ROOT}/_output/images}"
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
# binary name | main package
BINARIES=(
  "scaleplane-controller-manager|./cmd/controller-manager"
  "scaleplane-webhook|./cmd/webhook"
)

chart_app_version() {
  sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${SCALEPLANE_ROOT}/charts/scaleplane/Chart.yaml"
}

TAG="${SCALEPLANE_IMAGE_TAG:-$(chart_app_version)}"
[[ -n "${TAG}" ]] || scaleplane::fatal "no appVersion in charts/scaleplane/Chart.yaml and no SCALEPLANE_IMAGE_TAG"
REVISION="$(git -C "${SCALEPLANE_ROOT}" rev-parse HEAD 2>/dev/null || echo unknown)"
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "${SCALEPLANE_ROOT}" log -1 --format=%ct HEAD 2>/dev/null || echo 0)}"
# imagetool reads it for every file's time and the config's created.
export SOURCE_DATE_EPOCH
# GNU date, then BSD date (macOS).
CREATED="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
  date -u -r "${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
LDFLAGS="-s -w -X github.com/scaleplane/scaleplane/pkg/version.gitVersion=${TAG} -X github.com/scaleplane/scaleplane/pkg/version.gitCommit=${REVISION}"

# build_binaries cross-compiles every binary for one platform, in one go
# build so that the packages they share are compiled once. Static (no cgo):
# the image has no C library and no loader. -buildvcs=false whatever GOFLAGS
# says: the commit is stamped by -X, and the VCS data go build would record
# (vcs.modified among it) depend on the checkout, not only on the commit.
build_binaries() {
  local platform="$1" entry name pkg pkgs=()
  local os="${platform%/*}" arch="${platform#*/}"
  local dir="${OUT_DIR}/bin/${os}_${arch}" start=${SECONDS}
  for entry in "${BINARIES[@]}"; do
    IFS='|' read -r name pkg <<<"${entry}"
    pkgs+=("${pkg}")
  done
  mkdir -p "${dir}/build"
  CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" GOWORK=off \
    go build -trimpath -buildvcs=false -ldflags "${LDFLAGS}" -o "${dir}/build/" "${pkgs[@]}"
  # go build names each binary after its package directory.
  for entry in "${BINARIES[@]}"; do
    IFS='|' read -r name pkg <<<"${entry}"
    mv -f "${dir}/build/$(basename "${pkg}")" "${dir}/${name}"
  done
  scaleplane::log "binaries for ${platform} built in $((SECONDS - start))s"
}

build_image() {
  local name="$1" platform
  local args=(build --output "${OUT_DIR}/${name}.tar" --repository "${REGISTRY}/${name}" --tag "${TAG}"
    --ca-certificates "${CA_BUNDLE}"
    --label "org.opencontainers.image.title=${name}"
    --label "org.opencontainers.image.description=scaleplane: scaling controllers for Kubernetes and Karmada"
    --label "org.opencontainers.image.source=https://github.com/scaleplane/scaleplane"
    --label "org.opencontainers.image.version=${TAG}"
    --label "org.opencontainers.image.revision=${REVISION}"
    --label "org.opencontainers.image.created=${CREATED}"
    --label "org.opencontainers.image.licenses=Apache-2.0")
  for platform in "${PLATFORM_LIST[@]}"; do
    args+=(--binary "${platform}=${OUT_DIR}/bin/${platform%/*}_${platform#*/}/${name}")
  done
  "${SCALEPLANE_BIN_DIR}/imagetool" "${args[@]}"
}

main() {
  command -v go >/dev/null || scaleplane::fatal "go is not on PATH"
  [[ -f "${CA_BUNDLE}" ]] || scaleplane::fatal "no ${CA_BUNDLE}: apt-get install -y ca-certificates"
  "${SCALEPLANE_ROOT}/hack/install-tools.sh" imagetool
  IFS=',' read -r -a PLATFORM_LIST <<<"${PLATFORMS}"
  scaleplane::log "images ${REGISTRY}/<name>:${TAG} for ${PLATFORMS}"
  local platform entry name pkg
  for platform in "${PLATFORM_LIST[@]}"; do
    build_binaries "${platform}"
  done
  for entry in "${BINARIES[@]}"; do
    IFS='|' read -r name pkg <<<"${entry}"
    build_image "${name}"
  done
}

main "$@"
