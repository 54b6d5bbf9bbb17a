#!/usr/bin/env bash
# Runs scaleplane-webhook for the local cluster of hack/local-up.sh and
# registers it with the local kube-apiserver.
#
#   hack/local-up-webhook.sh         start (or keep) the webhook, apply its configuration
#   hack/local-up-webhook.sh stop    stop the webhook process
#
# - Certificates (made once, with openssl): a CA and a serving certificate for
#   127.0.0.1 and localhost, in _output/local/webhook/. The key never leaves
#   that directory and is never printed.
# - The process: _output/bin/scaleplane-webhook on 127.0.0.1:${SCALEPLANE_LOCAL_WEBHOOK_PORT:-19443},
#   in the background, pid in _output/local/pids/scaleplane-webhook.pid (pid
#   and binary, the format hack/local-down.sh reads), log in
#   _output/local/logs/scaleplane-webhook.log.
# - The ValidatingWebhookConfiguration of artifacts/deploy/webhook/, with each
#   webhook's clientConfig.service replaced by url https://127.0.0.1:PORT<path>
#   and the local CA as caBundle, applied with the local admin kubeconfig.
#
# Idempotent: a running webhook is left alone, existing certificates are
# reused (and renewed when they expire within a day), the configuration is
# re-applied.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

LOCAL_DIR="${SCALEPLANE_ROOT}/_output/local"
CERT_DIR="${LOCAL_DIR}/webhook"
PID_FILE="${LOCAL_DIR}/pids/scaleplane-webhook.pid"
LOG_FILE="${LOCAL_DIR}/logs/scaleplane-webhook.log"
KUBECONFIG_PATH="${SCALEPLANE_LOCAL_KUBECONFIG:-${LOCAL_DIR}/kubeconfig}"
PORT="${SCALEPLANE_LOCAL_WEBHOOK_PORT:-19443}"
BIN="${SCALEPLANE_ROOT}/_output/bin/scaleplane-webhook"
KUBECTL="${SCALEPLANE_BIN_DIR}/kubectl"
MANIFEST="${SCALEPLANE_ROOT}/artifacts/deploy/webhook/validatingwebhookconfiguration.yaml"

# kube-apiserver and the health probe talk to 127.0.0.1 directly.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,${NO_PROXY}}"
export no_proxy="${NO_PROXY}"

# webhook_pid prints the pid of the running webhook, or fails. The pid file is
# checked against the process's argv[0], as pids are reused.
webhook_pid() {
  local pid bin argv0
  [[ -f "${PID_FILE}" ]] || return 1
  read -r pid bin < "${PID_FILE}" || return 1
  [[ -n "${pid}" && -r "/proc/${pid}/cmdline" ]] || return 1
  argv0="$(tr '\0' '\n' < "/proc/${pid}/cmdline" | head -n1)"
  [[ "${argv0}" == "${bin}" ]] || return 1
  echo "${pid}"
}

make_certs() {
  mkdir -p "${CERT_DIR}"
  chmod 700 "${CERT_DIR}"
  if [[ ! -f "${CERT_DIR}/ca.crt" || ! -f "${CERT_DIR}/ca.key" ]] \
      || ! openssl x509 -checkend 86400 -noout -in "${CERT_DIR}/ca.crt" >/dev/null 2>&1; then
    scaleplane::log "webhook: creating a CA in ${CERT_DIR}"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -subj "/CN=scaleplane-webhook-local-ca" \
      -keyout "${CERT_DIR}/ca.key" -out "${CERT_DIR}/ca.crt" 2>/dev/null
    rm -f "${CERT_DIR}/tls.crt"
  fi
  if [[ -f "${CERT_DIR}/tls.crt" && -f "${CERT_DIR}/tls.key" ]] \
      && openssl x509 -checkend 86400 -noout -in "${CERT_DIR}/tls.crt" >/dev/null 2>&1; then
    return
  fi
  scaleplane::log "webhook: creating the serving certificate for 127.0.0.1"
  local ext="${CERT_DIR}/tls.ext"
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" > "${ext}"
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=scaleplane-webhook" \
    -keyout "${CERT_DIR}/tls.key.new" -out "${CERT_DIR}/tls.csr" 2>/dev/null
  openssl x509 -req -sha256 -days 365 -in "${CERT_DIR}/tls.csr" -extfile "${ext}" \
    -CA "${CERT_DIR}/ca.crt" -CAkey "${CERT_DIR}/ca.key" -CAcreateserial \
    -out "${CERT_DIR}/tls.crt.new" 2>/dev/null
  chmod 600 "${CERT_DIR}/tls.key.new" "${CERT_DIR}/ca.key"
  # Key first, then certificate: the running webhook reloads the pair, and
  # keeps the old one while the two do not match.
  mv -f "${CERT_DIR}/tls.key.new" "${CERT_DIR}/tls.key"
  mv -f "${CERT_DIR}/tls.crt.new" "${CERT_DIR}/tls.crt"
  rm -f "${CERT_DIR}/tls.csr" "${ext}"
}

start_webhook() {
  local pid
  if pid="$(webhook_pid)"; then
    scaleplane::log "webhook: already running (pid ${pid})"
    return
  fi
  mkdir -p "$(dirname "${PID_FILE}")" "$(dirname "${LOG_FILE}")"
  echo "### $(date -u +'%Y-%m-%dT%H:%M:%SZ') ${BIN}" >> "${LOG_FILE}"
  # A session of its own, so that a Ctrl-C in the terminal or the end of
  # `make` does not reach it.
  setsid "${BIN}" --bind-address=127.0.0.1 --secure-port="${PORT}" \
    --tls-cert-file="${CERT_DIR}/tls.crt" --tls-private-key-file="${CERT_DIR}/tls.key" \
    >> "${LOG_FILE}" 2>&1 < /dev/null &
  echo "$! ${BIN}" > "${PID_FILE}"
  scaleplane::log "webhook: started (pid $!), log ${LOG_FILE}"
}

# healthz checks /healthz over TLS, verifying the certificate against the CA.
healthz() {
  if command -v curl >/dev/null; then
    curl --silent --fail --max-time 2 --cacert "${CERT_DIR}/ca.crt" "https://127.0.0.1:${PORT}/healthz"
  else
    "${KUBECTL}" --kubeconfig=/dev/null --server="https://127.0.0.1:${PORT}" \
      --certificate-authority="${CERT_DIR}/ca.crt" get --raw /healthz
  fi
}

wait_healthy() {
  local deadline=$((SECONDS + 30))
  until healthz >/dev/null 2>&1; do
    if ! webhook_pid >/dev/null; then
      tail -n 20 "${LOG_FILE}" >&2 || true
      scaleplane::fatal "scaleplane-webhook exited; log: ${LOG_FILE}"
    fi
    if (( SECONDS >= deadline )); then
      tail -n 20 "${LOG_FILE}" >&2 || true
      scaleplane::fatal "scaleplane-webhook not healthy after 30s; log: ${LOG_FILE}"
    fi
    sleep 0.5
  done
  scaleplane::log "webhook: healthy on https://127.0.0.1:${PORT}"
}

# local_configuration prints the ValidatingWebhookConfiguration with each
# clientConfig.service block replaced by a url to the local process. The
# manifest's layout (service: with namespace, name, path, port below it) is
# fixed by the same repository, and test/integration/webhook registers the
# same file with the same rewrite.
local_configuration() {
  local ca_bundle
  ca_bundle="$(base64 -w0 < "${CERT_DIR}/ca.crt")"
  awk -v base="https://127.0.0.1:${PORT}" -v ca="${ca_bundle}" '
    function flush() {
      if (in_service) {
        print indent "url: " base path
        print indent "caBundle: " ca
        in_service = 0
      }
    }
    /^ *service: *$/ { in_service = 1; indent = substr($0, 1, index($0, "s") - 1); path = ""; next }
    in_service && match($0, /^ */) && RLENGTH > length(indent) {
      if ($1 == "path:") path = $2
      next
    }
    { flush(); print }
    END { flush() }
  ' "${MANIFEST}"
}

apply_configuration() {
  [[ -f "${KUBECONFIG_PATH}" ]] || scaleplane::fatal "no kubeconfig at ${KUBECONFIG_PATH}: start the cluster with hack/local-up.sh"
  local_configuration | "${KUBECTL}" --kubeconfig="${KUBECONFIG_PATH}" apply -f - >/dev/null
  scaleplane::log "webhook: ValidatingWebhookConfiguration scaleplane-webhook points at https://127.0.0.1:${PORT}"
}

stop_webhook() {
  local pid i
  if ! pid="$(webhook_pid)"; then
    rm -f "${PID_FILE}"
    return
  fi
  kill -TERM "${pid}" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "${pid}" 2>/dev/null; then
    scaleplane::log "webhook: did not stop in 20s, killing it"
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${PID_FILE}"
  scaleplane::log "webhook: stopped (pid ${pid})"
}

main() {
  case "${1:-start}" in
    start)
      [[ -x "${BIN}" ]] || scaleplane::fatal "no ${BIN}: run \`make build\`"
      [[ -x "${KUBECTL}" ]] || scaleplane::fatal "no ${KUBECTL}: run \`make tools\`"
      command -v openssl >/dev/null || scaleplane::fatal "openssl is needed for the certificates: apt-get install -y openssl"
      make_certs
      start_webhook
      wait_healthy
      apply_configuration
      ;;
    stop) stop_webhook ;;
    print-configuration) local_configuration ;;
    *) scaleplane::fatal "usage: $0 [start|stop|print-configuration]" ;;
  esac
}

main "$@"
