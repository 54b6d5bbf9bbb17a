#!/usr/bin/env bash
# Builds every program scaleplane's generators, linters, tests and
# hack/local-up.sh need into _output/bin (or $SCALEPLANE_BIN_DIR), from the
# versions pinned in hack/tools/go.mod and its nested modules. Only the Go
# toolchain and the Go module proxy are needed; nothing is downloaded prebuilt.
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
  "imagetool|images|."
)

# A go.work above the repository must not change which versions get built.
export GOWORK=off
# Static binaries: no C toolchain needed, and they run on any Linux.
export CGO_ENABLED=0

# ldflags_for prints the -ldflags for a tool. The Kubernetes binaries get the
# version they are built from stamped in (as upstream's build does), so
# /version and `kubectl version` report v1.37.x instead of v0.0.0-master.
ldflags_for() {
  local module="$1"
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
  ldflags="$(ldflags_for "${module}")"
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
done
if (( ${#wanted[@]} > 0 && found != ${#wanted[@]} )); then
  scaleplane::fatal "unknown tool in: ${wanted[*]}"
fi
