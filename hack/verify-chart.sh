#!/usr/bin/env bash
# Lints charts/scaleplane and renders it with each way of getting the
# webhook's certificate, with the helm pinned in hack/tools/helm. The chart's
# CRDs are checked by hack/verify-crdgen.sh, and the rendered manifests are
# applied to a real kube-apiserver by test/integration/chart.
set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/init.sh
source "${REPO_ROOT}/hack/lib/init.sh"
"${REPO_ROOT}/hack/install-tools.sh" helm
HELM="${SCALEPLANE_BIN_DIR}/helm"
CHART="${REPO_ROOT}/charts/scaleplane"

# Keep helm's caches and config out of the user's home.
HELM_HOME=$(mktemp -d)
trap 'rm -rf "${HELM_HOME}"' EXIT
export HELM_CACHE_HOME="${HELM_HOME}/cache" HELM_CONFIG_HOME="${HELM_HOME}/config" HELM_DATA_HOME="${HELM_HOME}/data"

"${HELM}" lint --strict "${CHART}"
# On Karmada the server and the configuration are rendered apart
# (values-karmada.yaml, docs/karmada); the companion controller manager
# mounts Karmada's kubeconfig Secret.
KARMADA="--values ${CHART}/values-karmada.yaml"
# shellcheck disable=SC2086
"${HELM}" lint --strict "${CHART}" ${KARMADA} --set webhook.configuration.enabled=false
for values in \
  "" \
  "${KARMADA} --set webhook.configuration.enabled=false" \
  "${KARMADA} --set webhook.server.enabled=false --set webhook.caBundle=Zm9v" \
  "${KARMADA} --set webhook.enabled=false --set karmada.leaderWorkerSetInterpreter.enabled=true" \
  "${KARMADA} --set webhook.enabled=false --set controllerManager.enabled=true --set controllerManager.kubeconfig.secretName=karmada-kubeconfig --set controllerManager.kubeconfig.key=kubeconfig --set controllerManager.leaderElection.namespace=karmada-system" \
  "--set webhook.certManager.enabled=true" \
  "--set monitoring.enabled=true" \
  "--set monitoring.enabled=true --set webhook.enabled=false --set monitoring.labels.release=kps" \
  "--set webhook.existingSecret=my-cert --set webhook.caBundle=Zm9v" \
  "--set webhook.enabled=false --set controllerManager.extraScaleTargets[0].apiGroups[0]=example.com --set controllerManager.extraScaleTargets[0].resources[0]=myworkloads/scale"; do
  # shellcheck disable=SC2086
  if ! "${HELM}" template scaleplane "${CHART}" --namespace scaleplane-system ${values} >/dev/null; then
    echo "helm template failed with: ${values:-the default values}" >&2
    exit 1
  fi
done
echo "charts/scaleplane: lint and template ok"
