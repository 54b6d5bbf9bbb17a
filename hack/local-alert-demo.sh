#!/usr/bin/env bash
# Shows one of the chart's alerts firing in the Prometheus of `make local-up`:
# stops scaleplane-controller-manager across the slots of a CronFederatedHPA
# and waits until Prometheus's API reports ScaleplaneCronFiringsMissed firing.
#
#   hack/local-alert-demo.sh              the missed firings (about 4 minutes)
#   hack/local-alert-demo.sh --no-leader  also ScaleplaneNoLeader, which
#                                         needs the manager down for 5 minutes
#                                         (about 9 minutes in all)
#
# The CronFederatedHPA is the nginx example's (artifacts/examples/
# cronfederatedhpa/deployment.yaml) with its slot moved to every minute, in a
# namespace of its own, scaleplane-alert-demo, deleted at the end (pass --keep
# to keep it); the examples themselves fire at 08:30 and 11:00 only. What
# happens, in docs/alerts.md's terms:
#   1. the manager runs a firing (status.executionHistories records success);
#   2. the manager is stopped, and stays down across two slots: Prometheus
#      sees its target down and ScaleplaneNoLeader pending (firing after 5
#      minutes, with --no-leader);
#   3. the manager is started again with the arguments local-up gave it: it
#      runs the latest slot late and records the older one as missed (a
#      MissedSchedule Warning event), cron_scaler_missed_firings_total goes
#      up, and ScaleplaneCronFiringsMissed fires at the next evaluation.
# The alert then stays firing for 15 minutes (its increase() window). It
# works the same with SCALEPLANE_LOCAL_KARMADA=1: the manager is started again
# with the arguments local-up recorded, the sidecar's.

set -o errexit -o nounset -o pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
source "${SCALEPLANE_ROOT}/hack/lib/local.sh"

NAMESPACE=scaleplane-alert-demo
PROM="http://127.0.0.1:${PROMETHEUS_PORT}"
no_leader=false
keep=false
for arg in "$@"; do
  case "${arg}" in
    --no-leader) no_leader=true ;;
    --keep) keep=true ;;
    *) scaleplane::fatal "usage: $0 [--no-leader] [--keep]" ;;
  esac
done

command -v curl >/dev/null || scaleplane::fatal "curl is needed to ask Prometheus's API: apt-get install -y curl"
for c in scaleplane-controller-manager prometheus; do
  local::pid "${c}" >/dev/null || scaleplane::fatal "${c} is not running: start the local cluster with make local-up"
done
ARGS_FILE="${LOCAL_DIR}/scaleplane-controller-manager.args"
[[ -f "${ARGS_FILE}" ]] || scaleplane::fatal "no ${ARGS_FILE}: start the local cluster with make local-up"
mapfile -t CM_ARGS < "${ARGS_FILE}"
CM_BIN="${SCALEPLANE_BIN_DIR}/scaleplane-controller-manager"
CM_HTTP_PORT="${CM_PORT}"
for a in "${CM_ARGS[@]}"; do
  [[ "${a}" == --port=* ]] && CM_HTTP_PORT="${a#--port=}"
done

# query prints the result of an instant PromQL query, as the API answers it.
query() {
  curl --silent --show-error --fail --max-time 5 "${PROM}/api/v1/query" --data-urlencode "query=$1"
}

# has_result succeeds if the query returns at least one series.
has_result() {
  local out
  out="$(query "$1")" || return 1
  [[ "${out}" == *'"status":"success"'* && "${out}" != *'"result":[]'* ]]
}

alert_state() {
  local out
  out="$(query "ALERTS{alertname=\"$1\"}")" || { echo "unknown"; return; }
  if [[ "${out}" == *'"alertstate":"firing"'* ]]; then echo firing
  elif [[ "${out}" == *'"alertstate":"pending"'* ]]; then echo pending
  else echo inactive
  fi
}

# show_alert prints the alert as GET /api/v1/alerts reports it.
show_alert() {
  local out
  out="$(curl --silent --show-error --fail --max-time 5 "${PROM}/api/v1/alerts")"
  if command -v jq >/dev/null; then
    jq --arg name "$1" '.data.alerts[] | select(.labels.alertname == $name)' <<<"${out}"
  else
    echo "${out}"
  fi
}

wait_for() {
  local what="$1" timeout="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    (( SECONDS < deadline )) || scaleplane::fatal "timed out after ${timeout}s waiting for ${what}"
    sleep 2
  done
  scaleplane::log "${what}"
}

firing() { [[ "$(alert_state "$1")" == firing ]]; }

succeeded() {
  "${KUBECTL[@]}" -n "${NAMESPACE}" get cronfederatedhpa nginx-cronfhpa \
    -o jsonpath='{.status.executionHistories[*].successfulExecutions[*].executionTime}' 2>/dev/null | grep -q .
}

# minute_start prints the epoch second at which the n-th minute from now starts.
minute_start() {
  local now
  now="$(date +%s)"
  echo $(( (now / 60 + $1) * 60 ))
}

sleep_until() {
  local t="$1" now
  now="$(date +%s)"
  if (( t > now )); then sleep $((t - now)); fi
}

cleanup() {
  if [[ "${keep}" == false ]]; then
    "${KUBECTL[@]}" delete namespace "${NAMESPACE}" --wait=false --ignore-not-found >/dev/null || true
  fi
}

wait_for "Prometheus scrapes the manager" 60 has_result 'up{job="scaleplane-controller-manager"} == 1'
wait_for "Prometheus has the manager's cron_scaler_missed_firings_total" 60 has_result 'cron_scaler_missed_firings_total'
scaleplane::log "now: missed firings $(query 'cron_scaler_missed_firings_total' | grep -o '"value":\[[^]]*\]' || true)," \
  "ScaleplaneCronFiringsMissed $(alert_state ScaleplaneCronFiringsMissed), ScaleplaneNoLeader $(alert_state ScaleplaneNoLeader)"

# An alert already firing would prove nothing; ScaleplaneCronFiringsMissed
# stays firing for 15 minutes after a miss, an earlier run's too.
for alert in ScaleplaneCronFiringsMissed ScaleplaneNoLeader; do
  if [[ "$(alert_state "${alert}")" != inactive ]]; then
    scaleplane::fatal "${alert} is $(alert_state "${alert}") already (an earlier run? it clears 15 minutes after a miss); try again later, or after make local-down && make local-up (which starts Prometheus afresh)"
  fi
done

trap cleanup EXIT
"${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: ${NAMESPACE}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx
  namespace: ${NAMESPACE}
  labels:
    app: nginx
spec:
  replicas: 1
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
        - name: nginx
          image: nginx:1.27
          resources:
            requests:
              cpu: 10m
              memory: 16Mi
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: nginx-cronfhpa
  namespace: ${NAMESPACE}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx
  rules:
    - name: every-minute
      schedule: "* * * * *"
      targetReplicas: 2
EOF
scaleplane::log "created ${NAMESPACE}/nginx-cronfhpa: the nginx example, its rule firing every minute"
wait_for "the manager ran a firing (status.executionHistories)" 130 succeeded

# Stopped right after a slot, so that two whole slots pass while it is down.
sleep_until "$(( $(minute_start 1) + 3 ))"
local::stop scaleplane-controller-manager
down_at="$(date +%s)"
scaleplane::log "scaleplane-controller-manager stopped; it stays down across the next two slots"
sleep_until "$(( $(minute_start 2) + 15 ))"
if [[ "${no_leader}" == true ]]; then
  wait_for "ScaleplaneNoLeader is firing" 480 firing ScaleplaneNoLeader
  show_alert ScaleplaneNoLeader
fi
scaleplane::log "while down: target up=$(query 'up{job="scaleplane-controller-manager"}' | grep -o '"value":\[[^]]*\]' || true)," \
  "ScaleplaneNoLeader $(alert_state ScaleplaneNoLeader), ScaleplaneCronFiringsMissed $(alert_state ScaleplaneCronFiringsMissed)"

# Started as hack/local-up.sh starts it (its arguments are recorded there).
local::start scaleplane-controller-manager "${CM_BIN}" "${CM_ARGS[@]}"
local::wait_cmd scaleplane-controller-manager 60 local::http_ok "${CM_HTTP_PORT}" /healthz
scaleplane::log "scaleplane-controller-manager started again after $(( $(date +%s) - down_at ))s down"

wait_for "ScaleplaneCronFiringsMissed is firing" 180 firing ScaleplaneCronFiringsMissed
echo
echo "GET ${PROM}/api/v1/alerts, the alert ScaleplaneCronFiringsMissed:"
show_alert ScaleplaneCronFiringsMissed
echo
echo "The CronFederatedHPA's Warning events:"
"${KUBECTL[@]}" -n "${NAMESPACE}" get events --field-selector type=Warning \
  -o custom-columns=REASON:.reason,MESSAGE:.message --sort-by=.lastTimestamp || true
echo
echo "See it in the UI: ${PROM}/alerts (docs/alerts.md#scaleplanecronfiringsmissed)"
