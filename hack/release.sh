#!/usr/bin/env bash
# Cuts a release of scaleplane, offline, into _output/release (`make release
# VERSION=vX.Y.Z`; docs/releasing.md):
#
#   scaleplane-controller-manager.oci.tar, scaleplane-webhook.oci.tar
#       the images for linux/amd64 and linux/arm64, each an OCI image layout
#       tarball holding one image index (hack/build-images.sh)
#   images.txt                  each image as repository:version@sha256:digest
#   kubectl-scaleplane_<os>_<arch>.tar.gz (.zip on windows), and .sha256
#       the kubectl plugin with LICENSE, per platform
#   scaleplane.yaml             the krew manifest, filled from those archives
#   scaleplane-<X.Y.Z>.tgz      the Helm chart at the version, images pinned by digest
#   RELEASE_NOTES.md            the CHANGELOG.md entry of the version, and what was built from what
#   SHA256SUMS                  sha256sum of every other file
#
# Every output is reproducible: the same commit gives the same bytes (times
# from the commit, -trimpath, fixed modes and owners, sorted archives, gzip
# without name or time); hack/verify-release-reproducible.sh checks it.
#
# Usage: hack/release.sh vX.Y.Z   (or VERSION=vX.Y.Z hack/release.sh)
#
# Environment:
#   SCALEPLANE_RELEASE_IMAGE_PLATFORMS   default linux/amd64,linux/arm64
#   SCALEPLANE_RELEASE_PLUGIN_PLATFORMS  default linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64
#   SCALEPLANE_RELEASE_URL     where the plugin archives are downloaded from, the version
#                              appended (default https://github.com/scaleplane/scaleplane/releases/download)
#   SCALEPLANE_IMAGE_REGISTRY  repository prefix of the images (default ghcr.io/scaleplane)
#   SCALEPLANE_RELEASE_ALLOW_DIRTY=1  release from a tree with changes not committed (to try
#                              the script; such a release does not match its commit)

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

VERSION="${1:-${VERSION:-}}"
IMAGE_PLATFORMS="${SCALEPLANE_RELEASE_IMAGE_PLATFORMS:-linux/amd64,linux/arm64}"
PLUGIN_PLATFORMS="${SCALEPLANE_RELEASE_PLUGIN_PLATFORMS:-linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64}"
RELEASE_URL="${SCALEPLANE_RELEASE_URL:-https://github.com/scaleplane/scaleplane/releases/download}"
REGISTRY="${SCALEPLANE_IMAGE_REGISTRY:-ghcr.io/scaleplane}"
OUT="${SCALEPLANE_ROOT}/_output/release"
WORK="${SCALEPLANE_ROOT}/_output/release-build"
IMAGES=(scaleplane-controller-manager scaleplane-webhook)
IMAGETOOL="${SCALEPLANE_BIN_DIR}/imagetool"
HELM="${SCALEPLANE_BIN_DIR}/helm"
VERSION_PKG=github.com/scaleplane/scaleplane/pkg/version

# --- Checks ----------------------------------------------------------------

check_version() {
  [[ -n "${VERSION}" ]] || scaleplane::fatal "usage: make release VERSION=vX.Y.Z"
  [[ "${VERSION}" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
    scaleplane::fatal "VERSION=${VERSION} is not vMAJOR.MINOR.PATCH[-PRERELEASE]"
  CHART_VERSION="${VERSION#v}"
}

# check_tree: a release is of a commit. Changes not committed (untracked
# files too: go build would compile them) would make it one of no commit.
check_tree() {
  git rev-parse --verify --quiet HEAD >/dev/null || scaleplane::fatal "not a git checkout with a commit"
  local changes
  changes="$(git status --porcelain)"
  if [[ -n "${changes}" ]]; then
    [[ "${SCALEPLANE_RELEASE_ALLOW_DIRTY:-}" == 1 ]] ||
      scaleplane::fatal "the tree has changes not committed (SCALEPLANE_RELEASE_ALLOW_DIRTY=1 to try anyway):"$'\n'"${changes}"
    scaleplane::log "WARNING: the tree has changes not committed; this release is not reproducible from ${COMMIT}"
  fi
}

# changelog_entry prints the body of CHANGELOG.md's "## [X.Y.Z]" (or
# "## [vX.Y.Z]") section, up to the next "## " heading or link references.
changelog_entry() {
  awk -v a="## [${CHART_VERSION}]" -v b="## [${VERSION}]" '
    index($0, a) == 1 || index($0, b) == 1 { found = 1; print; next }
    found && (/^## / || /^\[[^]]*\]: /) { exit }
    found { print }
  ' CHANGELOG.md
}

check_changelog() {
  [[ -f CHANGELOG.md ]] || scaleplane::fatal "no CHANGELOG.md"
  ENTRY="$(changelog_entry)"
  # The heading and at least one line that is not blank.
  [[ "$(grep -c '[^[:space:]]' <<<"${ENTRY}")" -ge 2 ]] ||
    scaleplane::fatal "CHANGELOG.md has no entry for ${VERSION}: add a \"## [${CHART_VERSION}] - $(date -u +%Y-%m-%d)\" section saying what changed"
}

# --- Artifacts ---------------------------------------------------------------

build_images() {
  local name
  SCALEPLANE_IMAGE_OUTPUT_DIR="${WORK}/images" SCALEPLANE_IMAGE_TAG="${VERSION}" \
    SCALEPLANE_IMAGE_PLATFORMS="${IMAGE_PLATFORMS}" SCALEPLANE_IMAGE_REGISTRY="${REGISTRY}" \
    SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH}" hack/build-images.sh
  : >"${OUT}/images.txt"
  for name in "${IMAGES[@]}"; do
    cp "${WORK}/images/${name}.tar" "${OUT}/${name}.oci.tar"
    DIGESTS[${name}]="$("${IMAGETOOL}" digest --archive "${OUT}/${name}.oci.tar")"
    echo "${REGISTRY}/${name}:${VERSION}@${DIGESTS[${name}]}" >>"${OUT}/images.txt"
  done
  # This host's binaries must say what they are.
  local host="linux_$(go env GOARCH)"
  if [[ -d "${WORK}/images/bin/${host}" ]]; then
    for name in "${IMAGES[@]}"; do
      check_version_output "${WORK}/images/bin/${host}/${name}"
    done
  fi
}

check_version_output() {
  local out
  out="$("$1" --version)"
  [[ "${out}" == *"${VERSION} (commit ${COMMIT},"* ]] ||
    scaleplane::fatal "$1 --version printed \"${out}\", want ${VERSION} and commit ${COMMIT}"
  scaleplane::log "${out}"
}

plugin_archive_name() {
  local os="${1%/*}" arch="${1#*/}" ext=tar.gz
  [[ "${os}" == windows ]] && ext=zip
  echo "kubectl-scaleplane_${os}_${arch}.${ext}"
}

build_plugin() {
  local platform os arch exe dir archive start=${SECONDS}
  IFS=',' read -r -a platforms <<<"${PLUGIN_PLATFORMS}"
  for platform in "${platforms[@]}"; do
    os="${platform%/*}" arch="${platform#*/}" exe=""
    [[ "${os}" == windows ]] && exe=.exe
    dir="${WORK}/plugin/${os}_${arch}"
    mkdir -p "${dir}"
    CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" GOWORK=off \
      go build -trimpath -buildvcs=false -ldflags "${LDFLAGS}" -o "${dir}/kubectl-scaleplane${exe}" ./cmd/kubectl-scaleplane
    if [[ "${platform}" == "$(go env GOOS)/$(go env GOARCH)" ]]; then
      check_version_output "${dir}/kubectl-scaleplane"
    fi
    archive="$(plugin_archive_name "${platform}")"
    "${IMAGETOOL}" archive --output "${OUT}/${archive}" --source-date-epoch "${SOURCE_DATE_EPOCH}" \
      --file "kubectl-scaleplane${exe}=${dir}/kubectl-scaleplane${exe}" --file "LICENSE=${SCALEPLANE_ROOT}/LICENSE"
    (cd "${OUT}" && sha256sum "${archive}" >"${archive}.sha256")
  done
  scaleplane::log "kubectl-scaleplane for ${PLUGIN_PLATFORMS} built in $((SECONDS - start))s"
}

# krew_manifest writes scaleplane.yaml: plugins/krew/scaleplane.yaml up to
# its platforms (with the version), then one platform per archive built.
krew_manifest() {
  local manifest="${OUT}/scaleplane.yaml" platform os arch exe archive sha
  awk -v v="${VERSION}" '
    /^  platforms:/ { exit }
    /^  version:/ { print "  version: " v; next }
    { print }
  ' plugins/krew/scaleplane.yaml >"${manifest}"
  echo "  platforms:" >>"${manifest}"
  IFS=',' read -r -a platforms <<<"${PLUGIN_PLATFORMS}"
  for platform in "${platforms[@]}"; do
    os="${platform%/*}" arch="${platform#*/}" exe=""
    [[ "${os}" == windows ]] && exe=.exe
    archive="$(plugin_archive_name "${platform}")"
    sha="$(cut -d' ' -f1 "${OUT}/${archive}.sha256")"
    cat >>"${manifest}" <<EOF
    - selector:
        matchLabels:
          os: ${os}
          arch: ${arch}
      uri: ${RELEASE_URL}/${VERSION}/${archive}
      sha256: "${sha}"
      bin: kubectl-scaleplane${exe}
      files:
        - from: kubectl-scaleplane${exe}
          to: .
        - from: LICENSE
          to: .
EOF
  done
  ! grep -q '0\{64\}' "${manifest}" || scaleplane::fatal "${manifest} still has a zero sha256"
}

# package_chart packages charts/scaleplane at the version with the images
# pinned by digest in its values.yaml, then repacks the .tgz: helm stamps
# every entry with the time it runs (time.Now() in pkg/chartutil/save.go of
# helm v3.22), so two `helm package` runs differ; imagetool repack rewrites
# it sorted, with the commit's time, owner 0:0 and gzip without name or time.
package_chart() {
  local chart="${WORK}/chart/scaleplane" name tgz="scaleplane-${CHART_VERSION}.tgz"
  mkdir -p "${WORK}/chart"
  cp -R charts/scaleplane "${chart}"
  awk -v cm="${DIGESTS[scaleplane-controller-manager]}" -v wh="${DIGESTS[scaleplane-webhook]}" -v reg="${REGISTRY}" '
    /^[^ #]/ { top = $0; sub(/:.*/, "", top) }
    /^    repository: ghcr\.io\/scaleplane\// { sub(/ghcr\.io\/scaleplane/, reg) }
    /^    digest:/ && top == "controllerManager" { print "    digest: \"" cm "\"  # the release'"'"'s image (make release)"; n++; next }
    /^    digest:/ && top == "webhook" { print "    digest: \"" wh "\"  # the release'"'"'s image (make release)"; n++; next }
    { print }
    END { if (n != 2) exit 1 }
  ' charts/scaleplane/values.yaml >"${chart}/values.yaml" ||
    scaleplane::fatal "charts/scaleplane/values.yaml: no controllerManager.image.digest or webhook.image.digest to set"
  local helm_home="${WORK}/helm"
  HELM_CACHE_HOME="${helm_home}/cache" HELM_CONFIG_HOME="${helm_home}/config" HELM_DATA_HOME="${helm_home}/data" \
    "${HELM}" package "${chart}" --version "${CHART_VERSION}" --app-version "${VERSION}" \
    --destination "${WORK}/chart-package" >/dev/null
  "${IMAGETOOL}" repack --input "${WORK}/chart-package/${tgz}" --output "${OUT}/${tgz}" \
    --source-date-epoch "${SOURCE_DATE_EPOCH}"
  # What the packaged chart runs: each image by the release's digest.
  local rendered
  rendered="$("${HELM}" template scaleplane "${OUT}/${tgz}" --set controllerManager.enabled=true | grep 'image: ')"
  for name in "${IMAGES[@]}"; do
    grep -qF "image: ${REGISTRY}/${name}:${VERSION}@${DIGESTS[${name}]}" <<<"${rendered}" ||
      scaleplane::fatal "the packaged chart does not run ${name} by digest:"$'\n'"${rendered}"
  done
}

# --- Next slices of issue 37 -------------------------------------------------
# Each runs after every artifact above is written and before SHA256SUMS, so
# that what it adds is checksummed too. docs/releasing.md says what they add.

# release_sboms: a CycloneDX SBOM per image and for the plugin, from the Go
# module graph (cyclonedx-gomod), attached to the images as OCI referrers.
release_sboms() { :; }

# release_provenance: an in-toto statement with a SLSA v1 provenance
# predicate naming the commit, the builder and the materials.
release_provenance() { :; }

# release_sign: cosign-compatible signatures of the images and the chart,
# with a key pair given to the command (keyless in hosted CI).
release_sign() { :; }

# release_push: the images and the chart (as an OCI artifact) to a registry,
# then the install-from-registry test.
release_push() { :; }

# --- Notes and checksums ---------------------------------------------------

release_notes() {
  local ca_sha name
  ca_sha="$(sha256sum /etc/ssl/certs/ca-certificates.crt | cut -d' ' -f1)"
  {
    echo "# scaleplane ${VERSION}"
    echo
    tail -n +2 <<<"${ENTRY}" | sed -e '/./,$!d'
    echo
    echo "## Images"
    echo
    for name in "${IMAGES[@]}"; do
      echo "- \`${REGISTRY}/${name}:${VERSION}@${DIGESTS[${name}]}\` (${IMAGE_PLATFORMS})"
    done
    echo
    echo "The chart \`scaleplane-${CHART_VERSION}.tgz\` runs them by these digests."
    echo
    echo "## Verify"
    echo
    echo '```sh'
    echo "sha256sum --check SHA256SUMS"
    echo '```'
    echo
    echo "## Built from"
    echo
    echo "- commit ${COMMIT}, its time ${CREATED} (SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH})"
    echo "- $(go version | sed 's/^go version //'), CGO_ENABLED=0, -trimpath"
    echo "- the images' CA bundle: /etc/ssl/certs/ca-certificates.crt, sha256 ${ca_sha}"
    echo
    echo "\`hack/verify-release-reproducible.sh\` rebuilds the release from two clean clones and compares every byte."
  } >"${OUT}/RELEASE_NOTES.md"
}

checksums() {
  (
    cd "${OUT}"
    find . -type f ! -name SHA256SUMS | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
    sha256sum --check --quiet SHA256SUMS
  )
}

main() {
  check_version
  COMMIT="$(git rev-parse HEAD)"
  check_tree
  check_changelog
  SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"
  export SOURCE_DATE_EPOCH
  CREATED="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
    date -u -r "${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
  # The same flags as hack/build-images.sh's, so --version agrees everywhere.
  LDFLAGS="-s -w -X ${VERSION_PKG}.gitVersion=${VERSION} -X ${VERSION_PKG}.gitCommit=${COMMIT}"
  declare -g -A DIGESTS=()
  scaleplane::log "release ${VERSION} of ${COMMIT} (${CREATED}) into ${OUT#"${SCALEPLANE_ROOT}/"}"
  local start=${SECONDS}

  hack/install-tools.sh imagetool helm
  rm -rf "${OUT}" "${WORK}"
  mkdir -p "${OUT}" "${WORK}"
  build_images
  build_plugin
  krew_manifest
  package_chart
  release_sboms
  release_provenance
  release_sign
  release_push
  release_notes
  checksums
  rm -rf "${WORK}"
  scaleplane::log "release ${VERSION} written to ${OUT#"${SCALEPLANE_ROOT}/"} in $((SECONDS - start))s:"
  cat "${OUT}/SHA256SUMS" >&2
}

main "$@"
