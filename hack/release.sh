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
#   scaleplane-<X.Y.Z>.chart.oci.tar  the same chart as an OCI artifact (what `helm push`
#                               makes of it), for oci:// installs
#   sbom/<name>_<os>_<arch>.cdx.json  a CycloneDX SBOM (cyclonedx-gomod) of each image's
#                               binary per platform, and of the plugin per platform
#   provenance.intoto.json      an in-toto statement with a SLSA v1 provenance predicate:
#                               every file above, the images and the chart as subjects
#   signatures.oci.tar          cosign's signatures of the images and the chart and their
#                               attestations (SBOMs, provenance), for hack/push-release.sh
#   cosign.pub                  the public key it was signed with (a key pair's release)
#   RELEASE_NOTES.md            the CHANGELOG.md entry of the version, and what was built from what
#   SHA256SUMS                  sha256sum of every other file
#   SHA256SUMS.sig              its cosign signature (SHA256SUMS.sigstore.json when keyless)
#
# Every output but the signatures is reproducible: the same commit gives the
# same bytes (times from the commit, -trimpath, fixed modes and owners, sorted
# archives, gzip without name or time); hack/verify-release-reproducible.sh
# checks it. ECDSA signatures are not (each has a random nonce); what they
# sign is.
#
# Signing needs a registry (cosign signs what a registry serves): the release
# stages its images and chart in a loopback registry of its own (imagetool
# registry), signs and attests them there with cosign, and saves cosign's
# manifests into signatures.oci.tar. Nothing leaves the machine.
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
#   SCALEPLANE_RELEASE_SIGN    key (the default when SCALEPLANE_RELEASE_KEY is set), keyless
#                              (hosted CI: a Fulcio certificate for the workflow's OIDC identity,
#                              entries in Rekor), or none (an unsigned release, to try the script)
#   SCALEPLANE_RELEASE_KEY     a cosign private key (cosign generate-key-pair); its password
#                              in COSIGN_PASSWORD
#   SCALEPLANE_RELEASE_BUILDER the provenance's builder id (default: this script at the commit)
#   SCALEPLANE_RELEASE_INVOCATION  the provenance's invocation id (the CI run's URL)
#   SCALEPLANE_RELEASE_OUTPUT, SCALEPLANE_RELEASE_WORK  where to write the release and
#                              its scratch files (default _output/release, _output/release-build)

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

VERSION="${1:-${VERSION:-}}"
IMAGE_PLATFORMS="${SCALEPLANE_RELEASE_IMAGE_PLATFORMS:-linux/amd64,linux/arm64}"
PLUGIN_PLATFORMS="${SCALEPLANE_RELEASE_PLUGIN_PLATFORMS:-linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64}"
RELEASE_URL="${SCALEPLANE_RELEASE_URL:-https://github.com/scaleplane/scaleplane/releases/download}"
REGISTRY="${SCALEPLANE_IMAGE_REGISTRY:-ghcr.io/scaleplane}"
OUT="${SCALEPLANE_RELEASE_OUTPUT:-${SCALEPLANE_ROOT}/_output/release}"
WORK="${SCALEPLANE_RELEASE_WORK:-${SCALEPLANE_ROOT}/_output/release-build}"
SIGN="${SCALEPLANE_RELEASE_SIGN:-}"
SOURCE_URI=https://github.com/scaleplane/scaleplane
IMAGES=(scaleplane-controller-manager scaleplane-webhook)
IMAGETOOL="${SCALEPLANE_BIN_DIR}/imagetool"
HELM="${SCALEPLANE_BIN_DIR}/helm"
COSIGN="${SCALEPLANE_BIN_DIR}/cosign"
CYCLONEDX="${SCALEPLANE_BIN_DIR}/cyclonedx-gomod"
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

# check_sign: a release is signed, with a key pair here or keyless in hosted
# CI; unsigned only when asked for by name.
check_sign() {
  if [[ -z "${SIGN}" ]]; then
    [[ -n "${SCALEPLANE_RELEASE_KEY:-}" ]] ||
      scaleplane::fatal "a release is signed: SCALEPLANE_RELEASE_KEY=cosign.key (password in COSIGN_PASSWORD; cosign generate-key-pair makes one), SCALEPLANE_RELEASE_SIGN=keyless in hosted CI, or SCALEPLANE_RELEASE_SIGN=none to try an unsigned release"
    SIGN=key
  fi
  case "${SIGN}" in
    key)
      [[ -f "${SCALEPLANE_RELEASE_KEY:-}" ]] ||
        scaleplane::fatal "SCALEPLANE_RELEASE_SIGN=key needs SCALEPLANE_RELEASE_KEY, a cosign private key file (got \"${SCALEPLANE_RELEASE_KEY:-}\")"
      [[ -n "${COSIGN_PASSWORD+set}" ]] ||
        scaleplane::fatal "COSIGN_PASSWORD is not set: cosign would ask for the key's password on a terminal (set it, empty for a key without one)"
      ;;
    keyless | none) ;;
    *) scaleplane::fatal "SCALEPLANE_RELEASE_SIGN=${SIGN}: want key, keyless or none" ;;
  esac
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

# chart_artifact wraps the packaged chart as the OCI artifact helm pushes
# (imagetool chart: the same media types, the commit's time in place of
# helm's clock), so `helm install oci://...` gets the same digest from any
# registry it is pushed to.
chart_artifact() {
  "${IMAGETOOL}" chart --chart "${OUT}/scaleplane-${CHART_VERSION}.tgz" --output "${OUT}/scaleplane-${CHART_VERSION}.chart.oci.tar"
  CHART_DIGEST="$("${IMAGETOOL}" digest --archive "${OUT}/scaleplane-${CHART_VERSION}.chart.oci.tar")"
}

# --- SBOMs, provenance, signatures -------------------------------------------

# sbom_serial is a UUID naming one SBOM: from the commit, the artifact and
# the platform, so a rebuild writes the same one (cyclonedx-gomod's default
# is random).
sbom_serial() {
  local h
  h="$(printf '%s %s %s' "${COMMIT}" "$1" "$2" | sha256sum | cut -c1-32)"
  echo "${h:0:8}-${h:8:4}-5${h:13:3}-8${h:17:3}-${h:20:12}"
}

# sbom writes the SBOM of one main package for one platform: cyclonedx-gomod
# app reads the module graph with the platform's build constraints (GOOS,
# GOARCH, CGO_ENABLED=0, as the release builds), with each module's license
# detected from its files. No timestamp: it would be the time of the run.
sbom() {
  local name="$1" pkg="$2" platform="$3"
  local os="${platform%/*}" arch="${platform#*/}"
  GOOS="${os}" GOARCH="${arch}" CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    "${CYCLONEDX}" app -json -licenses -notimestamp -output-version 1.6 \
    -serial "$(sbom_serial "${name}" "${platform}")" -main "${pkg}" \
    -output "${OUT}/sbom/${name}_${os}_${arch}.cdx.json" . 2>"${WORK}/sbom.log" ||
    { cat "${WORK}/sbom.log" >&2; scaleplane::fatal "cyclonedx-gomod failed for ${name} ${platform}"; }
}

release_sboms() {
  local platform
  mkdir -p "${OUT}/sbom"
  IFS=',' read -r -a platforms <<<"${IMAGE_PLATFORMS}"
  for platform in "${platforms[@]}"; do
    sbom scaleplane-controller-manager cmd/controller-manager "${platform}"
    sbom scaleplane-webhook cmd/webhook "${platform}"
  done
  IFS=',' read -r -a platforms <<<"${PLUGIN_PLATFORMS}"
  for platform in "${platforms[@]}"; do
    sbom kubectl-scaleplane cmd/kubectl-scaleplane "${platform}"
  done
}

# release_provenance writes provenance.intoto.json: its subjects are every
# file written so far and the images and the chart by the digests a registry
# serves them by; its materials the commit, every module
# compiled into the binaries (with go.sum's hash) and the CA bundle the images
# carry. The Go toolchain is named by its version (internalParameters.go):
# there is no digest of it that names the same thing on every machine. The
# predicate alone goes to cosign attest for the images and chart.
release_provenance() {
  local name modules="${WORK}/go-modules.txt"
  GOFLAGS=-mod=readonly go list -deps -f '{{with .Module}}{{.Path}} {{.Version}} {{.Sum}}{{end}}' \
    ./cmd/controller-manager ./cmd/webhook ./cmd/kubectl-scaleplane | LC_ALL=C sort -u >"${modules}"
  (cd "${OUT}" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum) >"${WORK}/subjects.txt"
  local args=()
  for name in "${IMAGES[@]}"; do
    args+=(--subject "${REGISTRY}/${name}=${DIGESTS[${name}]}")
  done
  args+=(--subject "${REGISTRY}/charts/scaleplane=${CHART_DIGEST}")
  [[ -n "${SCALEPLANE_RELEASE_INVOCATION:-}" ]] && args+=(--invocation-id "${SCALEPLANE_RELEASE_INVOCATION}")
  "${IMAGETOOL}" provenance --output "${OUT}/provenance.intoto.json" --predicate-output "${WORK}/provenance.predicate.json" \
    --build-type "${SOURCE_URI}/blob/${COMMIT}/docs/releasing.md#provenance" \
    --builder-id "${SCALEPLANE_RELEASE_BUILDER:-${SOURCE_URI}/blob/${COMMIT}/hack/release.sh}" \
    "${args[@]}" --subjects "${WORK}/subjects.txt" \
    --parameter "version=${VERSION}" --parameter "source=git+${SOURCE_URI}@${COMMIT}" \
    --parameter "imagePlatforms=${IMAGE_PLATFORMS}" --parameter "pluginPlatforms=${PLUGIN_PLATFORMS}" \
    --parameter "imageRegistry=${REGISTRY}" \
    --internal "go=$(go env GOVERSION)" --internal "CGO_ENABLED=0" --internal "SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH}" \
    --internal "ldflags=${LDFLAGS}" \
    --material "git+${SOURCE_URI}@${COMMIT}=gitCommit:${COMMIT}" \
    --material "file:///etc/ssl/certs/ca-certificates.crt=sha256:$(sha256sum /etc/ssl/certs/ca-certificates.crt | cut -d' ' -f1)" \
    --go-modules "${modules}"
}

# cosign_flags: how cosign signs. With a key pair, nothing goes to a
# transparency log (there is none offline; the public key is the trust);
# keyless, cosign gets a certificate for the CI workflow's identity from
# Fulcio and records every signature in Rekor, as users of keyless expect.
cosign_flags() {
  COSIGN_FLAGS=(--yes --allow-http-registry)
  if [[ "${SIGN}" == key ]]; then
    COSIGN_FLAGS+=(--key "${SCALEPLANE_RELEASE_KEY}" --tlog-upload=false)
  fi
}

# stage_registry starts imagetool's loopback registry and pushes the images
# and the chart to it: cosign signs what a registry serves.
stage_registry() {
  "${IMAGETOOL}" registry --address-file "${WORK}/registry.address" &
  REGISTRY_PID=$!
  trap 'kill "${REGISTRY_PID}" 2>/dev/null || true' EXIT
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s "${WORK}/registry.address" ]] && break
    kill -0 "${REGISTRY_PID}" 2>/dev/null || scaleplane::fatal "the staging registry exited"
    sleep 0.1
  done
  [[ -s "${WORK}/registry.address" ]] || scaleplane::fatal "the staging registry did not start in 10s"
  STAGE="$(cat "${WORK}/registry.address")/scaleplane"
  local name
  for name in "${IMAGES[@]}"; do
    "${IMAGETOOL}" push --archive "${OUT}/${name}.oci.tar" --reference "${STAGE}/${name}:${VERSION}" >/dev/null
  done
  "${IMAGETOOL}" push --archive "${OUT}/scaleplane-${CHART_VERSION}.chart.oci.tar" \
    --reference "${STAGE}/charts/scaleplane:${CHART_VERSION}" >/dev/null
}

# sign_artifact signs one staged repository's digest, naming the released
# repository as the signed identity (the staging address is not it), and
# attests the provenance and the given SBOMs to it.
sign_artifact() {
  local repo="$1" digest="$2" sbom
  shift 2
  "${COSIGN}" sign "${COSIGN_FLAGS[@]}" --sign-container-identity "${REGISTRY}/${repo}" \
    "${STAGE}/${repo}@${digest}" >>"${WORK}/cosign.log" 2>&1 ||
    { cat "${WORK}/cosign.log" >&2; scaleplane::fatal "cosign sign ${repo} failed"; }
  "${COSIGN}" attest "${COSIGN_FLAGS[@]}" --type slsaprovenance1 --predicate "${WORK}/provenance.predicate.json" \
    "${STAGE}/${repo}@${digest}" >>"${WORK}/cosign.log" 2>&1 ||
    { cat "${WORK}/cosign.log" >&2; scaleplane::fatal "cosign attest (provenance) ${repo} failed"; }
  for sbom in "$@"; do
    "${COSIGN}" attest "${COSIGN_FLAGS[@]}" --type cyclonedx --predicate "${sbom}" \
      "${STAGE}/${repo}@${digest}" >>"${WORK}/cosign.log" 2>&1 ||
      { cat "${WORK}/cosign.log" >&2; scaleplane::fatal "cosign attest (SBOM) ${repo} failed"; }
  done
  SAVED+=("${repo}:${digest/:/-}.sig" "${repo}:${digest/:/-}.att")
}

# release_sign signs and attests the images and the chart in the staging
# registry and saves cosign's manifests (tags sha256-<digest>.sig and .att,
# where cosign looks for them) into signatures.oci.tar.
release_sign() {
  [[ "${SIGN}" == none ]] && { scaleplane::log "WARNING: SCALEPLANE_RELEASE_SIGN=none: this release is not signed"; return; }
  cosign_flags
  stage_registry
  local name platform sboms
  SAVED=()
  for name in "${IMAGES[@]}"; do
    sboms=()
    IFS=',' read -r -a platforms <<<"${IMAGE_PLATFORMS}"
    for platform in "${platforms[@]}"; do
      sboms+=("${OUT}/sbom/${name}_${platform%/*}_${platform#*/}.cdx.json")
    done
    sign_artifact "${name}" "${DIGESTS[${name}]}" "${sboms[@]}"
  done
  sign_artifact charts/scaleplane "${CHART_DIGEST}"
  "${IMAGETOOL}" save --output "${OUT}/signatures.oci.tar" --prefix "${STAGE}" "${SAVED[@]}"
  kill "${REGISTRY_PID}" && wait "${REGISTRY_PID}" 2>/dev/null || true
  trap - EXIT
  if [[ "${SIGN}" == key ]]; then
    COSIGN_PASSWORD="${COSIGN_PASSWORD}" "${COSIGN}" public-key --key "${SCALEPLANE_RELEASE_KEY}" \
      --outfile "${OUT}/cosign.pub" 2>>"${WORK}/cosign.log"
  fi
  scaleplane::log "signed (${SIGN}) and attested: ${IMAGES[*]} and the chart"
}

# sign_checksums signs SHA256SUMS, and so every file of the release.
sign_checksums() {
  [[ "${SIGN}" == none ]] && return
  local out=(--output-signature "${OUT}/SHA256SUMS.sig")
  [[ "${SIGN}" == keyless ]] && out=(--bundle "${OUT}/SHA256SUMS.sigstore.json")
  local flags=(--yes)
  [[ "${SIGN}" == key ]] && flags+=(--key "${SCALEPLANE_RELEASE_KEY}" --tlog-upload=false)
  "${COSIGN}" sign-blob "${flags[@]}" "${out[@]}" "${OUT}/SHA256SUMS" >>"${WORK}/cosign.log" 2>&1 ||
    { cat "${WORK}/cosign.log" >&2; scaleplane::fatal "cosign sign-blob SHA256SUMS failed"; }
}

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
    echo "Every file against the checksums, and the checksums against the release's signature:"
    echo
    echo '```sh'
    echo "sha256sum --check SHA256SUMS"
    case "${SIGN}" in
      key) echo "cosign verify-blob --key cosign.pub --signature SHA256SUMS.sig --insecure-ignore-tlog SHA256SUMS" ;;
      keyless) echo "cosign verify-blob --bundle SHA256SUMS.sigstore.json --certificate-identity-regexp '^https://github.com/scaleplane/scaleplane/' --certificate-oidc-issuer https://token.actions.githubusercontent.com SHA256SUMS" ;;
    esac
    echo '```'
    echo
    if [[ "${SIGN}" != none ]]; then
      local verify="--key cosign.pub --insecure-ignore-tlog"
      [[ "${SIGN}" == keyless ]] && verify="--certificate-identity-regexp '^https://github.com/scaleplane/scaleplane/' --certificate-oidc-issuer https://token.actions.githubusercontent.com"
      echo "The images and the chart, their SBOMs (CycloneDX) and provenance (SLSA v1), from the registry (docs/releasing.md):"
      echo
      echo '```sh'
      echo "cosign verify ${verify} ${REGISTRY}/scaleplane-controller-manager:${VERSION}"
      echo "cosign verify ${verify} ${REGISTRY}/charts/scaleplane:${CHART_VERSION}"
      echo "cosign verify-attestation ${verify} --type cyclonedx ${REGISTRY}/scaleplane-controller-manager:${VERSION}"
      echo "cosign verify-attestation ${verify} --type slsaprovenance1 ${REGISTRY}/scaleplane-controller-manager:${VERSION}"
      echo '```'
      echo
    fi
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
    find . -type f ! -name 'SHA256SUMS*' | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS
    sha256sum --check --quiet SHA256SUMS
  )
}

main() {
  check_version
  COMMIT="$(git rev-parse HEAD)"
  check_tree
  check_changelog
  check_sign
  SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"
  export SOURCE_DATE_EPOCH
  CREATED="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null ||
    date -u -r "${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
  # The same flags as hack/build-images.sh's, so --version agrees everywhere.
  LDFLAGS="-s -w -X ${VERSION_PKG}.gitVersion=${VERSION} -X ${VERSION_PKG}.gitCommit=${COMMIT}"
  declare -g -A DIGESTS=()
  scaleplane::log "release ${VERSION} of ${COMMIT} (${CREATED}) into ${OUT#"${SCALEPLANE_ROOT}/"}"
  local start=${SECONDS}

  hack/install-tools.sh imagetool helm cyclonedx-gomod
  [[ "${SIGN}" == none ]] || hack/install-tools.sh cosign
  rm -rf "${OUT}" "${WORK}"
  mkdir -p "${OUT}" "${WORK}"
  build_images
  build_plugin
  krew_manifest
  package_chart
  chart_artifact
  release_sboms
  release_provenance
  release_sign
  release_notes
  checksums
  sign_checksums
  rm -rf "${WORK}"
  scaleplane::log "release ${VERSION} written to ${OUT#"${SCALEPLANE_ROOT}/"} in $((SECONDS - start))s:"
  cat "${OUT}/SHA256SUMS" >&2
}

main "$@"
