#!/usr/bin/env bash
# Renders the plain manifests in artifacts/deploy from charts/scaleplane, so
# the chart is their one source (hack/verify-manifests.sh fails when they
# disagree):
#
#   artifacts/deploy/controller-manager/*.yaml, artifacts/deploy/webhook/*.yaml
#       values hack/manifests-values.yaml, namespace scaleplane-system
#   artifacts/deploy/karmada/webhook.yaml (host cluster, karmada-system)
#       values charts/scaleplane/values-karmada.yaml, without the configuration
#   artifacts/deploy/karmada/webhook-configuration.yaml (karmada-apiserver)
#       values charts/scaleplane/values-karmada.yaml, without the server
#   artifacts/deploy/karmada/leaderworkerset-interpreter.yaml (karmada-apiserver)
#       the same render, with karmada.leaderWorkerSetInterpreter.enabled
#   artifacts/deploy/kubectl-plugin/rbac.yaml, artifacts/deploy/karmada/kubectl-plugin-rbac.yaml
#       the plugin's reader ClusterRole, for a cluster and for karmada-apiserver
#
# Each chart template lands in one file (the table below); a template this
# script does not know fails the run, so nothing the chart gains is silently
# missing from artifacts/deploy. The CRDs (hack/update-crdgen.sh), READMEs and
# the Karmada sidecar patches are not rendered: Helm cannot express a patch of
# another project's Deployment.
#
# Usage: hack/update-manifests.sh [output root, default the repository]

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

OUT_ROOT="${1:-${SCALEPLANE_ROOT}}"
CHART="${SCALEPLANE_ROOT}/charts/scaleplane"
HELM="${SCALEPLANE_BIN_DIR}/helm"
RELEASE=scaleplane

# template (under charts/scaleplane/templates) | file under artifacts/deploy
PLAIN=(
  "namespace.yaml|webhook/namespace.yaml"
  "controller-manager-serviceaccount.yaml|controller-manager/serviceaccount.yaml"
  "controller-manager-rbac.yaml|controller-manager/rbac.yaml"
  "controller-manager-deployment.yaml|controller-manager/deployment.yaml"
  "webhook-serviceaccount.yaml|webhook/serviceaccount.yaml"
  "webhook-service.yaml|webhook/service.yaml"
  "webhook-deployment.yaml|webhook/deployment.yaml"
  "webhook-configuration.yaml|webhook/validatingwebhookconfiguration.yaml"
  "kubectl-plugin-rbac.yaml|kubectl-plugin/rbac.yaml"
)
KARMADA_HOST=(
  "webhook-serviceaccount.yaml|karmada/webhook.yaml"
  "webhook-service.yaml|karmada/webhook.yaml"
  "webhook-deployment.yaml|karmada/webhook.yaml"
)
KARMADA_APISERVER=(
  "webhook-configuration.yaml|karmada/webhook-configuration.yaml"
  "karmada-leaderworkerset-interpreter.yaml|karmada/leaderworkerset-interpreter.yaml"
  "kubectl-plugin-rbac.yaml|karmada/kubectl-plugin-rbac.yaml"
)

TMP="$(mktemp -d)"
trap 'rm -rf "${TMP}"' EXIT
# Keep helm's caches and config out of the user's home.
export HELM_CACHE_HOME="${TMP}/helm" HELM_CONFIG_HOME="${TMP}/helm" HELM_DATA_HOME="${TMP}/helm"

# render NAME NAMESPACE VALUES-FILE [helm args...]: helm template into
# ${TMP}/NAME, one file per template that rendered anything.
render() {
  local name="$1" namespace="$2" values="$3"
  shift 3
  "${HELM}" template "${RELEASE}" "${CHART}" --namespace "${namespace}" \
    --values "${values}" "$@" --output-dir "${TMP}/${name}" >/dev/null
}

# body prints a rendered template without helm's "# Source:" lines and the
# document separator it starts with.
body() {
  sed -e '/^# Source: /d' "$1" | sed -e '1{/^---$/d;}'
}

header() {
  local values="$1"
  echo "# Generated from charts/scaleplane by hack/update-manifests.sh"
  echo "# (values: ${values#"${SCALEPLANE_ROOT}/"}). Do not edit: change the chart and run make update."
}

# emit NAME VALUES-FILE ENTRY...: writes each mapped file; templates mapped
# to the same file are joined in table order.
emit() {
  local name="$1" values="$2" rendered="${TMP}/$1/scaleplane/templates" entry template target
  shift 2
  local -A seen=()
  for entry in "$@"; do
    IFS='|' read -r template target <<<"${entry}"
    [[ -f "${rendered}/${template}" ]] || scaleplane::fatal "${name}: charts/scaleplane/templates/${template} rendered nothing"
    mkdir -p "$(dirname "${OUT_ROOT}/artifacts/deploy/${target}")"
    if [[ -z "${seen[${target}]:-}" ]]; then
      header "${values}" > "${OUT_ROOT}/artifacts/deploy/${target}"
      seen[${target}]=1
    else
      echo "---" >> "${OUT_ROOT}/artifacts/deploy/${target}"
    fi
    body "${rendered}/${template}" >> "${OUT_ROOT}/artifacts/deploy/${target}"
    rm "${rendered}/${template}"
  done
  local left
  left="$(find "${rendered}" -type f -printf '%f ' 2>/dev/null || true)"
  [[ -z "${left}" ]] || scaleplane::fatal "${name}: templates not mapped to a file in hack/update-manifests.sh: ${left}"
}

main() {
  "${SCALEPLANE_ROOT}/hack/install-tools.sh" helm
  local plain="${SCALEPLANE_ROOT}/hack/manifests-values.yaml" karmada="${CHART}/values-karmada.yaml"
  render plain scaleplane-system "${plain}"
  # values-karmada.yaml is for Helm users too: the plain files say kubectl.
  render karmada-host karmada-system "${karmada}" --set managedBy=kubectl --set webhook.configuration.enabled=false
  render karmada-apiserver karmada-system "${karmada}" --set managedBy=kubectl --set webhook.server.enabled=false \
    --set karmada.leaderWorkerSetInterpreter.enabled=true \
    --set kubectlPlugin.clusterRole=true
  emit plain "${plain}" "${PLAIN[@]}"
  emit karmada-host "${karmada}" "${KARMADA_HOST[@]}"
  emit karmada-apiserver "${karmada}" "${KARMADA_APISERVER[@]}"
}

main "$@"
