#!/usr/bin/env bash
# Stops every process hack/local-up.sh started, newest first, and checks that
# none of its ports is still listening. The state in _output/local (etcd data,
# certificates, logs) is kept, so the next local-up comes back with the same
# objects; pass --clean to delete it as well. Prometheus's data is deleted
# either way: it holds the series of processes that are gone, and alerts
# computed from them (a manager "missing" for as long as the cluster was
# down) would greet the next local-up.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
source "${SCALEPLANE_ROOT}/hack/lib/local.sh"

clean=false
case "${1:-}" in
  --clean) clean=true ;;
  "") ;;
  *) scaleplane::fatal "usage: $0 [--clean]" ;;
esac

if [[ -d "${LOCAL_PIDS}" ]]; then
  for ((i = ${#LOCAL_COMPONENTS[@]} - 1; i >= 0; i--)); do
    local::stop "${LOCAL_COMPONENTS[i]}"
  done
fi

if ! local::pid prometheus >/dev/null && [[ -d "${PROMETHEUS_DIR}/data" ]]; then
  rm -rf "${PROMETHEUS_DIR}/data"
  scaleplane::log "removed Prometheus's data"
fi

busy=()
for port in "${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${KCM_PORT}" "${SCHEDULER_PORT}" "${CM_PORT}" "${WEBHOOK_PORT}" "${KWOK_PORT}" "${METRICS_SERVER_PORT}" "${PROMETHEUS_PORT}"; do
  if local::port_open "${port}"; then
    busy+=("${port}")
  fi
done
if (( ${#busy[@]} > 0 )); then
  scaleplane::fatal "still listening on 127.0.0.1 port(s) ${busy[*]}: not started by local-up, or left over; check with: ss -ltnp"
fi

if [[ "${clean}" == true ]]; then
  rm -rf "${LOCAL_DIR}"
  scaleplane::log "removed ${LOCAL_DIR}"
fi
scaleplane::log "local cluster stopped"
