#!/usr/bin/env bash
# Checks that a release is reproducible: clones HEAD twice into temporary
# directories, runs hack/release.sh in each, and compares every file of the
# two _output/release trees (SHA256SUMS lists them all: the image archives,
# whose index digests images.txt names, the plugin archives, the krew
# manifest, the chart and its OCI artifact, the SBOMs, the provenance, the
# notes). Any difference fails, naming the files. The releases are unsigned
# (SCALEPLANE_RELEASE_SIGN=none): an ECDSA signature differs at every run, and
# what it signs is what is compared here; test/integration/release signs a
# release and verifies it from a registry. Then it checks that the release
# refuses a bad version, a version without a CHANGELOG.md entry, a tree with
# changes not committed, and a release with no way to sign it.
#
# Usage: hack/verify-release-reproducible.sh [--short] [vX.Y.Z]
#
#   --short   one platform: this host's linux images (linux/amd64 on CI) and
#             plugin archive, and the chart; what `make test` runs. Without
#             it, every platform of `make release` (`make verify-release`).
#   vX.Y.Z    default: the newest version CHANGELOG.md has an entry for.
#
# The tools (imagetool, helm) come from this checkout's $SCALEPLANE_BIN_DIR.
# Clone a builds with Go's build cache. Clone b, in the full form, builds
# with an empty build cache of its own, so that every package is compiled
# and every binary linked again and compared with what the cache gave; in
# the short form it shares the cache (which `make test`'s image step has
# just filled), and so checks everything after the go build (image layers,
# configs, labels and indexes, archives, the krew manifest, the chart, the
# notes) but not the compiler's and linker's own determinism.
# SCALEPLANE_VERIFY_COLD_CACHE=1 or 0 chooses for either form.
# SCALEPLANE_VERIFY_KEEP=1 keeps the clones.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${SCALEPLANE_ROOT}"

SHORT=0
VERSION=""
for arg in "$@"; do
  case "${arg}" in
    --short) SHORT=1 ;;
    v*) VERSION="${arg}" ;;
    *) scaleplane::fatal "usage: $0 [--short] [vX.Y.Z]" ;;
  esac
done
if [[ -z "${VERSION}" ]]; then
  VERSION="v$(sed -n 's/^## \[v\{0,1\}\([0-9][^]]*\)\].*/\1/p' CHANGELOG.md | head -n 1)"
  [[ "${VERSION}" != v ]] || scaleplane::fatal "CHANGELOG.md has no released version"
fi

if [[ "${SHORT}" == 1 ]]; then
  host="linux/$(go env GOARCH)"
  export SCALEPLANE_RELEASE_IMAGE_PLATFORMS="${host}" SCALEPLANE_RELEASE_PLUGIN_PLATFORMS="${host}"
fi
COLD_CACHE="${SCALEPLANE_VERIFY_COLD_CACHE:-$((1 - SHORT))}"
unset SCALEPLANE_RELEASE_ALLOW_DIRTY SCALEPLANE_RELEASE_KEY SCALEPLANE_RELEASE_OUTPUT SCALEPLANE_RELEASE_WORK
export SCALEPLANE_RELEASE_SIGN=none
# The clones' hack/install-tools.sh finds the tools this checkout built.
export SCALEPLANE_BIN_DIR

COMMIT="$(git rev-parse HEAD)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/scaleplane-release-verify.XXXXXX")"
if [[ "${SCALEPLANE_VERIFY_KEEP:-}" == 1 ]]; then
  scaleplane::log "keeping ${TMP}"
else
  trap 'rm -rf "${TMP}"' EXIT
fi

release_in_clone() {
  local dir="${TMP}/$1" start=${SECONDS}
  git clone --quiet "${SCALEPLANE_ROOT}" "${dir}"
  git -C "${dir}" checkout --quiet --detach "${COMMIT}"
  local cache=()
  if [[ "$1" == b && "${COLD_CACHE}" == 1 ]]; then
    cache=(env GOCACHE="${TMP}/gocache-b")
  fi
  scaleplane::log "release ${VERSION} in clone $1 (${dir})${cache[*]:+, with an empty Go build cache}"
  "${cache[@]}" "${dir}/hack/release.sh" "${VERSION}" >"${TMP}/$1.log" 2>&1 ||
    { tail -n 40 "${TMP}/$1.log" >&2; scaleplane::fatal "hack/release.sh failed in clone $1 (log above)"; }
  scaleplane::log "clone $1: release in $((SECONDS - start))s"
}

compare() {
  local a="${TMP}/a/_output/release" b="${TMP}/b/_output/release" f bad=0
  if ! diff <(cd "${a}" && find . -type f | LC_ALL=C sort) <(cd "${b}" && find . -type f | LC_ALL=C sort) >&2; then
    scaleplane::fatal "the two releases hold different files"
  fi
  while read -r _ f; do
    if ! cmp -s "${a}/${f}" "${b}/${f}"; then
      echo "DIFFERS: ${f}" >&2
      bad=1
    fi
  done <"${a}/SHA256SUMS"
  cmp -s "${a}/SHA256SUMS" "${b}/SHA256SUMS" || bad=1
  echo "--- images (repository:tag@index digest), the same in both:" >&2
  cat "${a}/images.txt" >&2
  echo "--- SHA256SUMS, the same in both:" >&2
  cat "${a}/SHA256SUMS" >&2
  if [[ "${bad}" == 1 ]]; then
    diff "${a}/SHA256SUMS" "${b}/SHA256SUMS" >&2 || true
    scaleplane::fatal "release ${VERSION} of ${COMMIT} is not reproducible (SCALEPLANE_VERIFY_KEEP=1 keeps both trees)"
  fi
}

# refusals checks, in clone a (clean, its release done and compared), that
# hack/release.sh refuses what docs/releasing.md says it refuses, before it
# builds anything: a version that is not vMAJOR.MINOR.PATCH[-PRERELEASE], a
# version without a CHANGELOG.md entry, a tree with an untracked file, and no
# key nor keyless nor none for signing.
refusals() {
  local dir="${TMP}/a" args want out sign
  for args in "0.1.0|is not vMAJOR.MINOR.PATCH" "v0.0.0-no.changelog|CHANGELOG.md has no entry" "untracked|changes not committed" "unsigned|a release is signed"; do
    want="${args#*|}" args="${args%%|*}" sign=none
    if [[ "${args}" == untracked ]]; then
      touch "${dir}/untracked-file"
      args="${VERSION}"
    fi
    if [[ "${args}" == unsigned ]]; then
      sign="" args="${VERSION}"
    fi
    if out="$(SCALEPLANE_RELEASE_SIGN="${sign}" "${dir}/hack/release.sh" "${args}" 2>&1)" || [[ "${out}" != *"${want}"* ]]; then
      echo "${out}" >&2
      scaleplane::fatal "hack/release.sh ${args} did not refuse with \"${want}\""
    fi
    rm -f "${dir}/untracked-file"
  done
}

main() {
  local start=${SECONDS} form=full
  [[ "${SHORT}" == 1 ]] && form="short (${host})"
  [[ "${COLD_CACHE}" == 1 ]] && form+=", clone b with an empty Go build cache"
  scaleplane::log "reproducibility of release ${VERSION} of ${COMMIT}, ${form}"
  hack/install-tools.sh imagetool helm cyclonedx-gomod
  release_in_clone a
  release_in_clone b
  compare
  refusals
  scaleplane::log "release ${VERSION}, ${form}: two runs from clean clones are identical, $(wc -l <"${TMP}/a/_output/release/SHA256SUMS") files, in $((SECONDS - start))s"
}

main
