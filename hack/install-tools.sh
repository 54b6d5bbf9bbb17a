#!/usr/bin/env bash
# Builds every program scaleplane's generators, linters, tests and
# hack/local-up.sh need into _output/bin (or $SCALEPLANE_BIN_DIR), from the
# versions pinned in hack/tools/go.mod and its nested modules. Only the Go
# toolchain and the Go module proxy are needed; nothing is downloaded prebuilt.
#
# One exception to "only Go": `prometheus` (for hack/local-up.sh only) also
# builds Prometheus's web UI, with node and npm, from the sources in the same
# pinned module; see install_prometheus_ui.
#
# Idempotent: each binary has a stamp file holding a hash of everything its
# build depends on (Go version, its module's go.mod and go.sum, its main
# package's sources, the build flags). A binary is rebuilt only when that hash
# changes or the binary is missing, so a warm `make tools` takes a second.
#
# Usage: hack/install-tools.sh [name...]   (default: every tool)

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

TOOLS_DIR="${SCALEPLANE_ROOT}/hack/tools"
STAMP_DIR="${SCALEPLANE_BIN_DIR}/.stamps"

# name | module directory under hack/tools | package to build (relative to the module)
# Why the nested modules exist is explained at the top of each one's go.mod.
TOOLS=(
  "controller-gen|.|sigs.k8s.io/controller-tools/cmd/controller-gen"
  "staticcheck|.|honnef.co/go/tools/cmd/staticcheck"
  "etcd|etcd|."
  "kube-apiserver|kube|./cmd/kube-apiserver"
  "kube-controller-manager|kube|./cmd/kube-controller-manager"
  "kube-scheduler|kube|./cmd/kube-scheduler"
  "kubectl|kube|./cmd/kubectl"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok"
  "metrics-server|metrics-server|sigs.k8s.io/metrics-server/cmd/metrics-server"
  "helm|helm|helm.sh/helm/v3/cmd/helm"
  "promtool|prometheus|github.com/prometheus/prometheus/cmd/promtool"
  "prometheus|prometheus|github.com/prometheus/prometheus/cmd/prometheus"
  "imagetool|images|."
  "cosign|cosign|github.com/sigstore/cosign/v2/cmd/cosign"
  "actionlint|actionlint|github.com/rhysd/actionlint/cmd/actionlint"
  "cyclonedx-gomod|cyclonedx|github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
)

# A go.work above the repository must not change which versions get built.
export GOWORK=off
# Static binaries: no C toolchain needed, and they run on any Linux.
export CGO_ENABLED=0

# ldflags_for prints the -ldflags for a tool. The Kubernetes binaries get the
# version they are built from stamped in (as upstream's build does), so
# /version and `kubectl version` report v1.37.x instead of v0.0.0-master.
ldflags_for() {
  local module="$1" name="$2"
  if [[ "${name}" == "prometheus" ]]; then
    # As its release build does (.promu.yml): /status and the UI show the
    # version, the one the module records in its VERSION file.
    local dir
    dir="$(cd "${TOOLS_DIR}/prometheus" && go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)"
    echo "-s -w -X github.com/prometheus/common/version.Version=$(cat "${dir}/VERSION")"
    return
  fi
  if [[ "${module}" != "kube" ]]; then
    echo "-s -w"
    return
  fi
  local version major minor flags="-s -w"
  version="$(cd "${TOOLS_DIR}/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
  major="${version#v}"; major="${major%%.*}"
  minor="${version#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
  done
  echo "${flags}"
}

# build_key hashes everything the binary depends on besides the module cache,
# which go.sum already pins.
build_key() {
  local module_dir="$1" pkg="$2" ldflags="$3"
  {
    go version
    echo "CGO_ENABLED=${CGO_ENABLED} pkg=${pkg} ldflags=${ldflags}"
    cat "${module_dir}/go.mod" "${module_dir}/go.sum"
    if [[ "${pkg}" == .* ]]; then
      cat "${module_dir}/${pkg}"/*.go
    fi
  } | sha256sum | cut -d' ' -f1
}

install_tool() {
  local name="$1" module="$2" pkg="$3"
  local module_dir="${TOOLS_DIR}/${module}"
  local out="${SCALEPLANE_BIN_DIR}/${name}" stamp="${STAMP_DIR}/${name}"
  local ldflags key
  ldflags="$(ldflags_for "${module}" "${name}")"
  key="$(build_key "${module_dir}" "${pkg}" "${ldflags}")"
  if [[ -x "${out}" && -f "${stamp}" && "$(cat "${stamp}")" == "${key}" ]]; then
    scaleplane::log "${name}: up to date"
    return
  fi
  scaleplane::log "${name}: building ${pkg} in ${module_dir#"${SCALEPLANE_ROOT}/"}"
  local start=${SECONDS}
  # Build to a temporary name and rename, so an interrupted build never leaves
  # a half-written binary that a stale stamp would call up to date.
  (cd "${module_dir}" && go build -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}")
  mv -f "${out}.tmp.$$" "${out}"
  echo "${key}" > "${stamp}"
  scaleplane::log "${name}: built in $((SECONDS - start))s"
}

# install_prometheus_ui builds the web UI of the pinned Prometheus into
# ${SCALEPLANE_BIN_DIR}/prometheus-web/static/mantine-ui. A prometheus binary
# built without the builtinassets tag (as here: the tag embeds files that only
# exist after this very build, in a module cache that is read-only) serves its
# pages from ./static relative to its working directory (web/ui/ui.go in the
# module), so hack/local-up.sh runs it in prometheus-web. Without these files
# the server works and its pages answer 500.
#
# The build is the module's own (web/ui/build_ui.sh --mantine-ui: pnpm, tsc,
# vite) on a writable copy of its web/ui, with the packages its pnpm-lock.yaml
# locks, save for the overrides in hack/tools/prometheus/ui/pnpm-overrides.yaml
# (why is in that file). pnpm itself is pinned, with its integrity, by
# hack/tools/prometheus/ui/package-lock.json. About a minute (59 s with
# empty npm and pnpm caches on 2 cores), once; then it is stamped like the
# binaries.
# locked_packages prints the name@version keys of a pnpm lockfile's packages.
locked_packages() {
  awk '/^packages:/ { p = 1; next } /^[^ ]/ { p = 0 } p && /^  [^ ]/ { print $1 }' "$1" | sort
}

install_prometheus_ui() {
  local ui_tools="${TOOLS_DIR}/prometheus/ui" out="${SCALEPLANE_BIN_DIR}/prometheus-web"
  local stamp="${STAMP_DIR}/prometheus-web" module_dir key
  module_dir="$(cd "${TOOLS_DIR}/prometheus" && go list -m -f '{{.Dir}}' github.com/prometheus/prometheus)"
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    scaleplane::fatal "prometheus-web: node and npm are needed to build Prometheus's web UI (apt-get install -y nodejs npm)"
  fi
  key="$({
    echo "${module_dir}"
    node --version
    cat "${ui_tools}/package-lock.json" "${ui_tools}/pnpm-overrides.yaml"
  } | sha256sum | cut -d' ' -f1)"
  if [[ -f "${out}/static/mantine-ui/index.html" && -f "${stamp}" && "$(cat "${stamp}")" == "${key}" ]]; then
    scaleplane::log "prometheus-web: up to date"
    return
  fi
  scaleplane::log "prometheus-web: building the web UI of ${module_dir#"$(go env GOMODCACHE)/"} with pnpm"
  local start=${SECONDS} build="${SCALEPLANE_ROOT}/_output/prometheus-ui-build"
  rm -rf "${build}"
  mkdir -p "${build}/pnpm"
  cp -r "${module_dir}/web/ui" "${build}/src"
  chmod -R u+w "${build}/src"
  if grep -q '^overrides:' "${build}/src/pnpm-workspace.yaml"; then
    scaleplane::fatal "prometheus-web: the module's pnpm-workspace.yaml has overrides of its own; merge ${ui_tools}/pnpm-overrides.yaml by hand"
  fi
  { echo; cat "${ui_tools}/pnpm-overrides.yaml"; } >> "${build}/src/pnpm-workspace.yaml"
  cp "${ui_tools}/package.json" "${ui_tools}/package-lock.json" "${build}/pnpm/"
  # pnpm comes as a native binary in an optional package per platform
  # (@pnpm/exe.linux-x64 here), which its Node.js entry point runs. Not
  # `npm ci`: the lockfile lacks the builds for the platforms the registry
  # here does not serve, which ci calls out of sync; install takes pnpm and
  # this platform's binary at the locked versions and checks their integrity.
  # Their install scripts only put the binary in place of the entry point.
  (cd "${build}/pnpm" && npm install --ignore-scripts --no-audit --no-fund --loglevel=error)
  # Not frozen: the overrides change the @mantine entries of the lockfile;
  # every other entry is kept as locked. CI="" as the module's Makefile
  # builds the UI (CI=true would make pnpm refuse any lockfile change).
  (
    cd "${build}/src"
    export PATH="${build}/pnpm/node_modules/.bin:${PATH}" CI=""
    # Its log is long (an "Unsupported engine" warning per package that
    # wants a newer node than the build needs); shown only if it fails.
    # minimum-release-age=0: that policy (a package must be three days old)
    # also checks the lockfile entries the overrides replace, and fails on
    # them because the registry here does not have them. The versions that
    # are installed are the lockfile's, which passed it upstream, and the
    # overrides', released months ago.
    pnpm install --no-frozen-lockfile --config.minimum-release-age=0 --reporter=append-only > ../pnpm-install.log 2>&1 \
      || { grep -v 'Unsupported engine' ../pnpm-install.log >&2; exit 1; }
    # The overrides must change the @mantine entries and nothing else.
    local changed
    changed="$(diff <(locked_packages "${module_dir}/web/ui/pnpm-lock.yaml") <(locked_packages pnpm-lock.yaml) \
      | grep '^[<>]' | grep -v "^[<>] '@mantine/" || true)"
    if [[ -n "${changed}" ]]; then
      echo "packages other than @mantine's changed from the module's lockfile:" >&2
      echo "${changed}" >&2
      exit 1
    fi
    bash build_ui.sh --mantine-ui > ../build.log 2>&1 || { cat ../build.log >&2; exit 1; }
  ) || scaleplane::fatal "prometheus-web: the UI build failed (its output is above)"
  # ${out} itself stays: it is the working directory of a Prometheus that
  # local-up runs, which then serves the new files.
  mkdir -p "${out}"
  rm -rf "${out}/static.tmp"
  mkdir -p "${out}/static.tmp"
  mv "${build}/src/static/mantine-ui" "${out}/static.tmp/mantine-ui"
  rm -rf "${out}/static"
  mv "${out}/static.tmp" "${out}/static"
  rm -rf "${build}"
  echo "${key}" > "${stamp}"
  scaleplane::log "prometheus-web: built in $((SECONDS - start))s"
}

command -v go >/dev/null || scaleplane::fatal "go is not on PATH; install Go $(sed -n 's/^go //p' "${SCALEPLANE_ROOT}/go.mod") or newer"
mkdir -p "${SCALEPLANE_BIN_DIR}" "${STAMP_DIR}"

wanted=("$@")
found=0
for entry in "${TOOLS[@]}"; do
  IFS='|' read -r name module pkg <<<"${entry}"
  if (( ${#wanted[@]} > 0 )) && [[ " ${wanted[*]} " != *" ${name} "* ]]; then
    continue
  fi
  found=$((found + 1))
  install_tool "${name}" "${module}" "${pkg}"
  if [[ "${name}" == prometheus ]]; then
    install_prometheus_ui
  fi
done
if (( ${#wanted[@]} > 0 && found != ${#wanted[@]} )); then
  scaleplane::fatal "unknown tool in: ${wanted[*]}"
fi
