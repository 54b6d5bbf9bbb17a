#!/usr/bin/env bash
# Starts a whole local control plane on 127.0.0.1 with scaleplane running in
# it: etcd, kube-apiserver, kube-controller-manager (--controllers=*),
# kube-scheduler and kwok with a few fake nodes (their pods really reach
# Running, with emulated resource usage), metrics-server (metrics.k8s.io, so
# kubectl top and HorizontalPodAutoscalers work), then the CRDs, scaleplane-controller-manager, the webhook (once
# it exists), the examples, and Prometheus scraping the manager and the
# webhook with the chart's alerting rules loaded (its UI's address is printed
# at the end; hack/local-alert-demo.sh makes an alert fire).
#
# Everything lives in _output/local: pid files, logs, certificates, etcd data
# and the admin kubeconfig (_output/local/kubeconfig). Run it again at any
# time: whatever is not running (a crashed or killed process) is started, the
# rest is left alone, and the manifests are re-applied. hack/local-down.sh
# stops it all.
#
# Binaries come from _output/bin: `make local-up` builds them first
# (`make tools build`).
#
# Ports (override with the environment variables):
#   SCALEPLANE_LOCAL_ETCD_PORT=12379 (peer port +1), SCALEPLANE_LOCAL_APISERVER_PORT=16443,
#   SCALEPLANE_LOCAL_KCM_PORT=10257, SCALEPLANE_LOCAL_SCHEDULER_PORT=10259,
#   SCALEPLANE_LOCAL_CM_PORT=10358, SCALEPLANE_LOCAL_WEBHOOK_PORT=19443,
#   SCALEPLANE_LOCAL_KWOK_PORT=10247, SCALEPLANE_LOCAL_METRICS_SERVER_PORT=14443,
#   SCALEPLANE_LOCAL_PROMETHEUS_PORT=19090
# SCALEPLANE_LOCAL_NODES=3 sets how many fake nodes kwok runs.
#
# SCALEPLANE_LOCAL_KARMADA=1 plays a Karmada control plane, as far as
# scaleplane can tell (artifacts/deploy/karmada/README.md):
#   - the CronFederatedHPA CRD is Karmada's shape: artifacts/deploy/crds's
#     without scaleplane's additions (spec.rules[].maxDelaySeconds,
#     status.executionHistories[].lastScheduleTime), made at run time by
#     hack/localkarmada, so unknown fields are pruned as on karmada-apiserver;
#   - the admin kubeconfig is also written to _output/local/karmada/config/
#     karmada.config, standing in for the Secret karmada-controller-manager-config
#     that Karmada mounts at /etc/karmada/config;
#   - scaleplane-controller-manager runs with exactly the args of the sidecar
#     container in artifacts/deploy/karmada/controller-manager-sidecar.yaml,
#     with $(POD_IP) as 127.0.0.1 and /etc/karmada/config as that directory
#     (its port is the patch's, not SCALEPLANE_LOCAL_CM_PORT), leader election
#     in the namespace karmada-system, created here;
#   - the examples are applied with --validate=warn: Karmada's schema has no
#     maxDelaySeconds, which kubectl's strict validation would refuse.
# Switching the variable on or off and running local-up again restarts the
# controller manager with the other flags and re-applies the CRDs.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
source "${SCALEPLANE_ROOT}/hack/lib/local.sh"

NODES="${SCALEPLANE_LOCAL_NODES:-3}"

require_binaries() {
  local missing=()
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok metrics-server scaleplane-controller-manager promtool; do
    [[ -x "${SCALEPLANE_BIN_DIR}/${b}" ]] || missing+=("${b}")
  done
  # Prometheus's web UI is built with the binary (hack/install-tools.sh prometheus).
  [[ -x "${SCALEPLANE_BIN_DIR}/prometheus" && -f "${PROMETHEUS_WEB}/static/mantine-ui/index.html" ]] \
    || missing+=("prometheus (with its web UI in ${PROMETHEUS_WEB})")
  if (( ${#missing[@]} > 0 )); then
    scaleplane::fatal "missing in ${SCALEPLANE_BIN_DIR}: ${missing[*]}; run \`make tools build\` (or just \`make local-up\`)"
  fi
  command -v openssl >/dev/null || scaleplane::fatal "openssl is needed to make the local certificates: apt-get install -y openssl"
}

# make_certs creates, once, the credentials of the local cluster: a CA (also
# the cluster signing CA of kube-controller-manager), kube-apiserver's serving
# certificate, the service account signing key, and a static admin token.
make_certs() {
  local d="${LOCAL_CERTS}"
  mkdir -p "${d}"
  if [[ ! -f "${d}/ca.crt" ]]; then
    scaleplane::log "creating the local CA and certificates in ${d}"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -subj "/CN=scaleplane-local-ca" -keyout "${d}/ca.key" -out "${d}/ca.crt" 2>/dev/null
    rm -f "${d}/apiserver.crt"
  fi
  sign_cert apiserver "kube-apiserver" \
    "IP:127.0.0.1,DNS:localhost,IP:${SERVICE_IP},DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # kwok serves the fake kubelets (metrics-server scrapes them over verified
  # TLS); metrics-server serves metrics.k8s.io to the aggregator, which checks
  # the name <service>.<namespace>.svc.
  sign_cert kwok "kwok" "IP:127.0.0.1"
  sign_cert metrics-server "metrics-server" "DNS:metrics-server.kube-system.svc,IP:127.0.0.1,DNS:localhost"
  make_front_proxy_certs
  if [[ ! -f "${d}/service-account.key" ]]; then
    openssl genrsa -out "${d}/service-account.key" 2048 2>/dev/null
  fi
  if [[ ! -f "${d}/tokens.csv" ]]; then
    echo "$(openssl rand -hex 16),admin,admin-uid,\"system:masters\"" > "${d}/tokens.csv"
  fi
  chmod 600 "${d}"/*.key "${d}/tokens.csv"
}

sign_cert() {
  local name="$1" cn="$2" san="$3" d="${LOCAL_CERTS}"
  [[ -f "${d}/${name}.crt" ]] && return
  openssl req -newkey rsa:2048 -nodes -subj "/CN=${cn}" \
    -keyout "${d}/${name}.key" -out "${d}/${name}.csr" 2>/dev/null
  openssl x509 -req -sha256 -days 3650 -in "${d}/${name}.csr" \
    -CA "${d}/ca.crt" -CAkey "${d}/ca.key" -CAcreateserial -out "${d}/${name}.crt" \
    -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' "${san}") 2>/dev/null
  rm -f "${d}/${name}.csr"
}

# make_front_proxy_certs creates the identity kube-apiserver presents to
# aggregated API servers (metrics-server): a client certificate from a CA of
# its own, which the aggregated servers trust only for that name.
make_front_proxy_certs() {
  local d="${LOCAL_CERTS}"
  if [[ ! -f "${d}/front-proxy-ca.crt" ]]; then
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -subj "/CN=scaleplane-local-front-proxy-ca" -keyout "${d}/front-proxy-ca.key" -out "${d}/front-proxy-ca.crt" 2>/dev/null
    rm -f "${d}/front-proxy-client.crt"
  fi
  [[ -f "${d}/front-proxy-client.crt" ]] && return
  openssl req -newkey rsa:2048 -nodes -subj "/CN=front-proxy-client" \
    -keyout "${d}/front-proxy-client.key" -out "${d}/front-proxy-client.csr" 2>/dev/null
  openssl x509 -req -sha256 -days 3650 -in "${d}/front-proxy-client.csr" \
    -CA "${d}/front-proxy-ca.crt" -CAkey "${d}/front-proxy-ca.key" -CAcreateserial -out "${d}/front-proxy-client.crt" \
    -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n') 2>/dev/null
  rm -f "${d}/front-proxy-client.csr"
}

write_kubeconfig() {
  local token
  token="$(cut -d, -f1 "${LOCAL_CERTS}/tokens.csv")"
  cat > "${KUBECONFIG_PATH}.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: scaleplane-local
  cluster:
    server: https://127.0.0.1:${APISERVER_PORT}
    certificate-authority: ${LOCAL_CERTS}/ca.crt
users:
- name: admin
  user:
    token: ${token}
contexts:
- name: scaleplane-local
  context:
    cluster: scaleplane-local
    user: admin
current-context: scaleplane-local
EOF
  chmod 600 "${KUBECONFIG_PATH}.tmp"
  mv -f "${KUBECONFIG_PATH}.tmp" "${KUBECONFIG_PATH}"
}

start_etcd() {
  local url="http://127.0.0.1:${ETCD_PORT}" peer="http://127.0.0.1:${ETCD_PEER_PORT}"
  local::start etcd "${SCALEPLANE_BIN_DIR}/etcd" \
    --name=local --data-dir="${LOCAL_DIR}/etcd-data" \
    --listen-client-urls="${url}" --advertise-client-urls="${url}" \
    --listen-peer-urls="${peer}" --initial-advertise-peer-urls="${peer}" \
    --initial-cluster="local=${peer}" --log-level=warn
  local::wait_port etcd "${ETCD_PORT}" 60
}

# --endpoint-reconciler-type=none: the reconciler would publish the advertise
# address as the "kubernetes" service endpoint and refuses a loopback one; the
# fake pods of kwok never call the apiserver through that service.
start_apiserver() {
  local c="${LOCAL_CERTS}"
  local::start kube-apiserver "${SCALEPLANE_BIN_DIR}/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:${ETCD_PORT}" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="${APISERVER_PORT}" \
    --endpoint-reconciler-type=none \
    --tls-cert-file="${c}/apiserver.crt" --tls-private-key-file="${c}/apiserver.key" \
    --client-ca-file="${c}/ca.crt" --token-auth-file="${c}/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="${c}/service-account.key" \
    --service-account-signing-key-file="${c}/service-account.key" \
    --service-cluster-ip-range="${SERVICE_CIDR}" \
    --cert-dir="${LOCAL_DIR}/apiserver-certs" \
    --requestheader-client-ca-file="${c}/front-proxy-ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="${c}/front-proxy-client.crt" --proxy-client-key-file="${c}/front-proxy-client.key" \
    --allow-privileged=true
  local::wait_cmd kube-apiserver 90 "${KUBECTL[@]}" get --raw /readyz
}

start_kcm() {
  local c="${LOCAL_CERTS}"
  local::start kube-controller-manager "${SCALEPLANE_BIN_DIR}/kube-controller-manager" \
    --kubeconfig="${KUBECONFIG_PATH}" --controllers='*' --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="${KCM_PORT}" --cert-dir="${LOCAL_DIR}/kcm-certs" \
    --service-account-private-key-file="${c}/service-account.key" --root-ca-file="${c}/ca.crt" \
    --cluster-signing-cert-file="${c}/ca.crt" --cluster-signing-key-file="${c}/ca.key" \
    --use-service-account-credentials=false
  local::wait_https kube-controller-manager "${KCM_PORT}" /healthz 60
}

start_scheduler() {
  local::start kube-scheduler "${SCALEPLANE_BIN_DIR}/kube-scheduler" \
    --kubeconfig="${KUBECONFIG_PATH}" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="${SCHEDULER_PORT}" --cert-dir="${LOCAL_DIR}/scheduler-certs"
  local::wait_https kube-scheduler "${SCHEDULER_PORT}" /healthz 60
}

# kwok's node and pod behaviour is configured by Stage objects; without them
# it exits with "no stages found". The stages are the ones kwok publishes in
# its module (node: initialize + heartbeat with lease; pod: the fast
# lifecycle), read from the module cache of the kwok version we pin (and
# hack/kwok/pod-resize.yaml, which answers in-place resizes), with its
# published Metric (the kubelet's /metrics/resource endpoint) and
# ClusterResourceUsage (usage from the pod annotations kwok.x-k8s.io/usage-cpu
# and kwok.x-k8s.io/usage-memory) configurations, which metrics-server scrapes.
start_kwok() {
  local config_dir="${LOCAL_DIR}/kwok-config" kwok_dir
  if [[ ! -d "${config_dir}" ]]; then
    kwok_dir="$(cd "${SCALEPLANE_ROOT}/hack/tools/kwok" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
    mkdir -p "${config_dir}.tmp"
    cp "${kwok_dir}/kustomize/stage/node/fast/node-initialize.yaml" \
      "${kwok_dir}/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
      "${kwok_dir}"/kustomize/stage/pod/fast/pod-*.yaml \
      "${kwok_dir}/kustomize/metrics/resource/metrics-resource.yaml" \
      "${kwok_dir}/kustomize/metrics/usage/usage-from-annotation.yaml" "${config_dir}.tmp/"
    chmod 644 "${config_dir}.tmp"/*.yaml
    mv "${config_dir}.tmp" "${config_dir}"
  fi
  # The project's own stage (answers in-place pod resizes as a kubelet with
  # room does; see the file) is copied at every start, so that an existing
  # local state gets it and its changes.
  install -m 644 "${SCALEPLANE_ROOT}/hack/kwok/pod-resize.yaml" "${config_dir}/pod-resize.yaml"
  local configs
  configs="$(printf '%s,' "${config_dir}"/*.yaml)"
  # --node-port is the kubelet port each node reports: metrics-server scrapes
  # kwok there, over TLS verified with the local CA.
  local::start kwok "${SCALEPLANE_BIN_DIR}/kwok" \
    --kubeconfig="${KUBECONFIG_PATH}" --config="${configs%,}" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 --cidr=10.244.0.0/16 --node-ip=127.0.0.1 \
    --node-port="${KWOK_PORT}" --server-address="127.0.0.1:${KWOK_PORT}" \
    --tls-cert-file="${LOCAL_CERTS}/kwok.crt" --tls-private-key-file="${LOCAL_CERTS}/kwok.key"
  local::wait_cmd kwok 60 local::http_ok "${KWOK_PORT}" /healthz
}

# metrics-server (built from its Go module) scrapes kwok's emulated kubelets
# and serves metrics.k8s.io through the aggregator: an ExternalName Service
# (there is no kube-proxy) and the v1beta1.metrics.k8s.io APIService with the
# local CA as caBundle. kubectl top nodes and kubectl top pods then answer, and
# HorizontalPodAutoscalers get their resource metrics.
start_metrics_server() {
  local c="${LOCAL_CERTS}"
  local::start metrics-server "${SCALEPLANE_BIN_DIR}/metrics-server" \
    --bind-address=127.0.0.1 --secure-port="${METRICS_SERVER_PORT}" \
    --kubeconfig="${KUBECONFIG_PATH}" --authentication-kubeconfig="${KUBECONFIG_PATH}" \
    --authorization-kubeconfig="${KUBECONFIG_PATH}" \
    --tls-cert-file="${c}/metrics-server.crt" --tls-private-key-file="${c}/metrics-server.key" \
    --kubelet-certificate-authority="${c}/ca.crt" \
    --kubelet-preferred-address-types=InternalIP --kubelet-use-node-status-port \
    --metric-resolution=15s --kubelet-request-timeout=5s
  local::wait_https metrics-server "${METRICS_SERVER_PORT}" /livez 60
}

register_metrics_api() {
  local ca_bundle
  ca_bundle="$(base64 -w0 < "${LOCAL_CERTS}/ca.crt")"
  "${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
spec:
  type: ExternalName
  externalName: localhost
  ports:
  - name: https
    port: ${METRICS_SERVER_PORT}
    protocol: TCP
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: ${ca_bundle}
  service:
    namespace: kube-system
    name: metrics-server
    port: ${METRICS_SERVER_PORT}
EOF
  local::wait_cmd "the metrics API" 90 "${KUBECTL[@]}" wait --for=condition=Available --timeout=5s apiservice/v1beta1.metrics.k8s.io
}

create_nodes() {
  local i manifest=""
  for ((i = 0; i < NODES; i++)); do
    manifest+="
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-${i}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: \"0\"
    metrics.k8s.io/resource-metrics-path: /metrics/nodes/kwok-node-${i}/metrics/resource
  labels:
    kubernetes.io/hostname: kwok-node-${i}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    kubernetes.io/role: agent
    node-role.kubernetes.io/agent: \"\"
    type: kwok
spec: {}
status:
  allocatable: {cpu: \"32\", memory: 256Gi, pods: \"110\"}
  capacity: {cpu: \"32\", memory: 256Gi, pods: \"110\"}
"
  done
  echo "${manifest}" | "${KUBECTL[@]}" apply -f - >/dev/null
  local::wait_cmd "${NODES} Ready kwok nodes" 60 nodes_ready
}

nodes_ready() {
  local ready
  ready="$("${KUBECTL[@]}" get nodes -l type=kwok \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$' || true)"
  (( ready >= NODES ))
}

install_crds() {
  if ! compgen -G "${SCALEPLANE_ROOT}/artifacts/deploy/crds/*.yaml" >/dev/null; then
    scaleplane::log "no CRDs in artifacts/deploy/crds yet"
    return
  fi
  local dir="${SCALEPLANE_ROOT}/artifacts/deploy/crds"
  if [[ "${LOCAL_KARMADA}" == 1 ]]; then
    dir="${KARMADA_DIR}/crds"
    karmada_crds "${dir}"
  fi
  # Server-side apply: generated CRDs outgrow the annotation client-side
  # apply keeps its last applied state in. The same field manager every
  # time, so switching SCALEPLANE_LOCAL_KARMADA removes or restores fields.
  "${KUBECTL[@]}" apply --server-side --force-conflicts -f "${dir}/" >/dev/null
  "${KUBECTL[@]}" wait --for=condition=Established --timeout=60s -f "${dir}/" >/dev/null
  scaleplane::log "CRDs installed from ${dir#"${SCALEPLANE_ROOT}/"}: $(ls "${dir}" | tr '\n' ' ')"
}

# cm_flag echoes "--name=value" only if scaleplane-controller-manager knows
# the flag, so this script keeps working while the binary's flags evolve.
cm_flag() {
  local bin="$1" name="$2" value="$3"
  if local::has_flag "${bin}" "${name}"; then
    echo "--${name}=${value}"
  fi
}

# controller_manager_args sets CM_ARGS: every controller against the local
# cluster, or in Karmada mode the sidecar container's args.
controller_manager_args() {
  local bin="${SCALEPLANE_BIN_DIR}/scaleplane-controller-manager" f
  if [[ "${LOCAL_KARMADA}" == 1 ]]; then
    local out
    out="$(karmada_sidecar_args)"
    mapfile -t CM_ARGS <<<"${out}"
    return
  fi
  CM_ARGS=(--kubeconfig="${KUBECONFIG_PATH}" --controllers='*')
  for f in "$(cm_flag "${bin}" bind-address 127.0.0.1)" \
           "$(cm_flag "${bin}" port "${CM_PORT}")" \
           "$(cm_flag "${bin}" secure-port "${CM_PORT}")" \
           "$(cm_flag "${bin}" leader-elect true)"; do
    [[ -n "${f}" ]] && CM_ARGS+=("${f}")
  done
}

# cm_port prints the --port of CM_ARGS (where /healthz is served).
cm_port() {
  local a port="${CM_PORT}"
  for a in "${CM_ARGS[@]}"; do
    [[ "${a}" == --port=* ]] && port="${a#--port=}"
  done
  echo "${port}"
}

start_controller_manager() {
  local bin="${SCALEPLANE_BIN_DIR}/scaleplane-controller-manager"
  printf '%s\n' "${CM_ARGS[@]}" > "${LOCAL_DIR}/scaleplane-controller-manager.args"
  local::start scaleplane-controller-manager "${bin}" "${CM_ARGS[@]}"
  # Its /healthz is plain HTTP on --bind-address:--port.
  local::wait_cmd scaleplane-controller-manager 60 local::http_ok "$(cm_port)" /healthz
}

# ensure_controller_manager starts the controller manager unless it runs with
# the wanted args already; a running one with other args (local-up run again
# with SCALEPLANE_LOCAL_KARMADA switched) is restarted.
ensure_controller_manager() {
  local recorded="${LOCAL_DIR}/scaleplane-controller-manager.args"
  controller_manager_args
  if local::pid scaleplane-controller-manager >/dev/null \
      && [[ "$(printf '%s\n' "${CM_ARGS[@]}")" != "$(cat "${recorded}" 2>/dev/null)" ]]; then
    scaleplane::log "scaleplane-controller-manager: runs with other flags (SCALEPLANE_LOCAL_KARMADA=${LOCAL_KARMADA}), restarting it"
    local::stop scaleplane-controller-manager
  fi
  local::ensure scaleplane-controller-manager start_controller_manager
}

# ---------------------------------------------------------------------------
# SCALEPLANE_LOCAL_KARMADA=1 (see the top of this file). hack/localkarmada
# reads the project's own files, so local-up runs what the sidecar install
# runs, not a copy of it.
# ---------------------------------------------------------------------------
KARMADA_SIDECAR_PATCH="${SCALEPLANE_ROOT}/artifacts/deploy/karmada/controller-manager-sidecar.yaml"
KARMADA_CONFIG_DIR="${KARMADA_DIR}/config"
# scaleplane's additions to the CronFederatedHPA schema; Karmada's has neither.
KARMADA_MISSING_FIELDS=("spec.rules[].maxDelaySeconds" "status.executionHistories[].lastScheduleTime")
LOCALKARMADA="${SCALEPLANE_BIN_DIR}/localkarmada"

prepare_karmada() {
  (cd "${SCALEPLANE_ROOT}" && GOWORK=off go build -o "${LOCALKARMADA}" ./hack/localkarmada)
  mkdir -p "${KARMADA_CONFIG_DIR}"
  chmod 700 "${KARMADA_DIR}" "${KARMADA_CONFIG_DIR}"
  # The admin kubeconfig, as Karmada's admin identity is what the sidecar
  # gets from the Secret.
  install -m 600 "${KUBECONFIG_PATH}" "${KARMADA_CONFIG_DIR}/karmada.config"
  "${KUBECTL[@]}" create namespace karmada-system --dry-run=client -o yaml | "${KUBECTL[@]}" apply -f - >/dev/null
  scaleplane::log "Karmada mode: kubeconfig in ${KARMADA_CONFIG_DIR}, namespace karmada-system"
}

# karmada_crds writes the CRDs to install into a directory: those of
# artifacts/deploy/crds, the CronFederatedHPA one without scaleplane's fields.
karmada_crds() {
  local dir="$1" cron="autoscaling.karmada.io_cronfederatedhpas" f remove=()
  rm -rf "${dir}"
  mkdir -p "${dir}"
  for f in "${SCALEPLANE_ROOT}"/artifacts/deploy/crds/*.yaml; do
    [[ "$(basename "${f}" .yaml)" == "${cron}" ]] || cp "${f}" "${dir}/"
  done
  for f in "${KARMADA_MISSING_FIELDS[@]}"; do
    remove+=(--remove "${f}")
  done
  "${LOCALKARMADA}" strip-crd --crd "${SCALEPLANE_ROOT}/artifacts/deploy/crds/${cron}.yaml" "${remove[@]}" > "${dir}/${cron}.json"
}

karmada_sidecar_args() {
  "${LOCALKARMADA}" sidecar-args --patch "${KARMADA_SIDECAR_PATCH}" \
    --container scaleplane-controller-manager --pod-ip 127.0.0.1 \
    --mount karmada-config="${KARMADA_CONFIG_DIR}"
}
# ------------------------- end of Karmada section --------------------------

# ---------------------------------------------------------------------------
# Webhook. hack/local-up-webhook.sh (owned with the webhook) makes its
# certificates, runs _output/bin/scaleplane-webhook on 127.0.0.1 and registers
# artifacts/deploy/webhook's configuration pointed at it; it writes its pid in
# the format of hack/lib/local.sh, so hack/local-down.sh stops it too. Skipped,
# saying so, while the binary or that script does not exist.
# ---------------------------------------------------------------------------
install_webhook() {
  local script="${SCALEPLANE_ROOT}/hack/local-up-webhook.sh"
  if [[ ! -x "${SCALEPLANE_BIN_DIR}/scaleplane-webhook" || ! -x "${script}" ]]; then
    scaleplane::log "webhook: skipped (needs ${SCALEPLANE_BIN_DIR}/scaleplane-webhook and ${script})"
    return
  fi
  SCALEPLANE_LOCAL_KUBECONFIG="${KUBECONFIG_PATH}" SCALEPLANE_LOCAL_WEBHOOK_PORT="${WEBHOOK_PORT}" "${script}" start
}
# --------------------------- end of webhook section ------------------------

# ---------------------------------------------------------------------------
# Prometheus, built from the pinned module with its web UI (hack/install-tools.sh
# prometheus). It scrapes the two endpoints exactly as local-up serves them, and
# sends no credentials because neither asks for any: the manager's /metrics is
# plain HTTP on 127.0.0.1 (--bind-address, --port), the webhook's is on its
# HTTPS port, verified against the webhook's local CA. The rules are the
# chart's own file, which is a rule file as it is (the chart wraps its groups
# in a PrometheusRule), so what fires here is what the chart would alert on.
# Scrapes and rule evaluations every 5 s, so that an alert shows in minutes.
# ---------------------------------------------------------------------------
PROMETHEUS_WEB="${SCALEPLANE_BIN_DIR}/prometheus-web"
PROMETHEUS_RULES="${SCALEPLANE_ROOT}/charts/scaleplane/files/prometheus-rules.yaml"

# prometheus_config prints the configuration; the webhook's job only when the
# webhook runs.
prometheus_config() {
  cat <<EOF
# Written by hack/local-up.sh at every run; edits are lost.
global:
  scrape_interval: 5s
  scrape_timeout: 4s
  evaluation_interval: 5s
rule_files:
  - ${PROMETHEUS_RULES}
scrape_configs:
  - job_name: scaleplane-controller-manager
    static_configs:
      - targets: ["127.0.0.1:$(cm_port)"]
EOF
  if local::pid scaleplane-webhook >/dev/null; then
    cat <<EOF
  - job_name: scaleplane-webhook
    scheme: https
    tls_config:
      ca_file: ${LOCAL_DIR}/webhook/ca.crt
    static_configs:
      - targets: ["127.0.0.1:${WEBHOOK_PORT}"]
EOF
  fi
}

# start_prometheus runs Prometheus in ${PROMETHEUS_WEB}: a binary without
# the builtinassets tag serves its pages from ./static (web/ui/ui.go of the
# module). No admin or lifecycle API; local-down deletes its data.
start_prometheus() {
  (
    cd "${PROMETHEUS_WEB}"
    local::start prometheus "${SCALEPLANE_BIN_DIR}/prometheus" \
      --config.file="${PROMETHEUS_DIR}/prometheus.yml" \
      --storage.tsdb.path="${PROMETHEUS_DIR}/data" --storage.tsdb.retention.time=1d \
      --web.listen-address="127.0.0.1:${PROMETHEUS_PORT}"
  )
  local::wait_cmd prometheus 60 local::http_ok "${PROMETHEUS_PORT}" /-/ready
}

# ensure_prometheus writes the configuration and starts Prometheus; one that
# runs already re-reads a changed configuration (SIGHUP), e.g. when the
# webhook came up or the manager's port changed with SCALEPLANE_LOCAL_KARMADA.
ensure_prometheus() {
  local config="${PROMETHEUS_DIR}/prometheus.yml" pid out
  mkdir -p "${PROMETHEUS_DIR}"
  prometheus_config > "${config}.new"
  if ! out="$("${SCALEPLANE_BIN_DIR}/promtool" check config "${config}.new" 2>&1)"; then
    scaleplane::fatal "the Prometheus configuration written to ${config}.new is invalid: ${out}"
  fi
  if cmp -s "${config}.new" "${config}"; then
    rm -f "${config}.new"
  else
    mv -f "${config}.new" "${config}"
    if pid="$(local::pid prometheus)"; then
      kill -HUP "${pid}"
      scaleplane::log "prometheus: configuration changed, reloaded"
    fi
  fi
  local::ensure prometheus start_prometheus
}
# ------------------------- end of Prometheus section -----------------------

apply_examples() {
  if ! compgen -G "${SCALEPLANE_ROOT}/artifacts/examples/*.yaml" >/dev/null \
      && ! compgen -G "${SCALEPLANE_ROOT}/artifacts/examples/*/*.yaml" >/dev/null; then
    scaleplane::log "no examples in artifacts/examples yet"
    return
  fi
  local validate=()
  if [[ "${LOCAL_KARMADA}" == 1 ]]; then
    # What a Karmada user sees: fields Karmada's schema lacks are dropped,
    # with a warning each.
    validate=(--validate=warn)
  fi
  "${KUBECTL[@]}" apply "${validate[@]}" --recursive -f "${SCALEPLANE_ROOT}/artifacts/examples/"
}

main() {
  require_binaries
  mkdir -p "${LOCAL_DIR}" "${LOCAL_PIDS}" "${LOCAL_LOGS}"
  make_certs
  write_kubeconfig

  local::ensure etcd start_etcd
  local::ensure kube-apiserver start_apiserver
  local::ensure kube-controller-manager start_kcm
  local::ensure kube-scheduler start_scheduler
  local::ensure kwok start_kwok
  create_nodes
  local::ensure metrics-server start_metrics_server
  register_metrics_api
  if [[ "${LOCAL_KARMADA}" == 1 ]]; then
    prepare_karmada
  fi
  install_crds
  ensure_controller_manager
  install_webhook
  apply_examples
  ensure_prometheus

  echo
  echo "scaleplane local cluster is up (state in ${LOCAL_DIR})."
  echo "  export KUBECONFIG=${KUBECONFIG_PATH}"
  echo "  ${SCALEPLANE_BIN_DIR}/kubectl get nodes"
  echo "Prometheus (the manager's and the webhook's metrics, the chart's alerts):"
  echo "  http://127.0.0.1:${PROMETHEUS_PORT}/alerts"
  echo "  see an alert fire: hack/local-alert-demo.sh (docs/alerts.md)"
  echo "Logs:"
  local log
  for log in "${LOCAL_LOGS}"/*.log; do
    echo "  ${log}"
  done
  echo "Stop everything with: make local-down (hack/local-down.sh)"
}

main "$@"
