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
# Pids, logs, ports and the start/stop/wait helpers are hack/local-up.sh's,
# so the webhook is one more component to it and to hack/local-down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/lib/local.sh"

NAME="scaleplane-webhook"
CERT_DIR="${LOCAL_DIR}/webhook"
KUBECONFIG_PATH="${SCALEPLANE_LOCAL_KUBECONFIG:-${KUBECONFIG_PATH}}"
PORT="${WEBHOOK_PORT}"
BIN="${SCALEPLANE_BIN_DIR}/scaleplane-webhook"
MANIFEST="${SCALEPLANE_ROOT}/artifacts/deploy/webhook/validatingwebhookconfiguration.yaml"

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
  local::start "${NAME}" "${BIN}" --bind-address=127.0.0.1 --secure-port="${PORT}" \
    --tls-cert-file="${CERT_DIR}/tls.crt" --tls-private-key-file="${CERT_DIR}/tls.key"
}

# healthz checks /healthz over TLS, verifying the certificate against the CA.
healthz() {
  if command -v curl >/dev/null; then
    curl --silent --fail --max-time 2 --cacert "${CERT_DIR}/ca.crt" "https://127.0.0.1:${PORT}/healthz"
  else
    "${SCALEPLANE_BIN_DIR}/kubectl" --kubeconfig=/dev/null --server="https://127.0.0.1:${PORT}" \
      --certificate-authority="${CERT_DIR}/ca.crt" get --raw /healthz
  fi
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
  local_configuration | "${SCALEPLANE_BIN_DIR}/kubectl" --kubeconfig="${KUBECONFIG_PATH}" apply -f - >/dev/null
  scaleplane::log "webhook: ValidatingWebhookConfiguration scaleplane-webhook points at https://127.0.0.1:${PORT}"
}

main() {
  case "${1:-start}" in
    start)
      [[ -x "${BIN}" ]] || scaleplane::fatal "no ${BIN}: run \`make build\`"
      [[ -x "${SCALEPLANE_BIN_DIR}/kubectl" ]] || scaleplane::fatal "no ${SCALEPLANE_BIN_DIR}/kubectl: run \`make tools\`"
      command -v openssl >/dev/null || scaleplane::fatal "openssl is needed for the certificates: apt-get install -y openssl"
      make_certs
      mkdir -p "${LOCAL_PIDS}" "${LOCAL_LOGS}"
      local::ensure "${NAME}" start_webhook
      local::wait_cmd "${NAME}" 30 healthz
      apply_configuration
      ;;
    stop) local::stop "${NAME}" ;;
    print-configuration) local_configuration ;;
    *) scaleplane::fatal "usage: $0 [start|stop|print-configuration]" ;;
  esac
}

main "$@"
