#!/usr/bin/env bash
# State and process helpers shared by hack/local-up.sh and hack/local-down.sh.
# Source after hack/lib/init.sh.

LOCAL_DIR="${SCALEPLANE_ROOT}/_output/local"
LOCAL_CERTS="${LOCAL_DIR}/certs"
LOCAL_PIDS="${LOCAL_DIR}/pids"
LOCAL_LOGS="${LOCAL_DIR}/logs"
KUBECONFIG_PATH="${LOCAL_DIR}/kubeconfig"

ETCD_PORT="${SCALEPLANE_LOCAL_ETCD_PORT:-12379}"
ETCD_PEER_PORT="$((ETCD_PORT + 1))"
APISERVER_PORT="${SCALEPLANE_LOCAL_APISERVER_PORT:-16443}"
KCM_PORT="${SCALEPLANE_LOCAL_KCM_PORT:-10257}"
SCHEDULER_PORT="${SCALEPLANE_LOCAL_SCHEDULER_PORT:-10259}"
CM_PORT="${SCALEPLANE_LOCAL_CM_PORT:-10358}"
WEBHOOK_PORT="${SCALEPLANE_LOCAL_WEBHOOK_PORT:-19443}"
# kwok serves its emulated kubelets (resource metrics included) on one port
# that every fake node reports as its kubelet port.
KWOK_PORT="${SCALEPLANE_LOCAL_KWOK_PORT:-10247}"
METRICS_SERVER_PORT="${SCALEPLANE_LOCAL_METRICS_SERVER_PORT:-14443}"
# Prometheus: its UI and API (plain HTTP on 127.0.0.1), scraping the manager
# and the webhook with the chart's alerting rules loaded.
PROMETHEUS_PORT="${SCALEPLANE_LOCAL_PROMETHEUS_PORT:-19090}"
PROMETHEUS_DIR="${LOCAL_DIR}/prometheus"
# SCALEPLANE_LOCAL_KARMADA=1: the controller manager runs the way the
# Karmada sidecar install runs it (artifacts/deploy/karmada), against
# Karmada's CronFederatedHPA schema; see hack/local-up.sh.
LOCAL_KARMADA="${SCALEPLANE_LOCAL_KARMADA:-0}"
KARMADA_DIR="${LOCAL_DIR}/karmada"
SERVICE_CIDR="10.96.0.0/16"
SERVICE_IP="10.96.0.1"

KUBECTL=("${SCALEPLANE_BIN_DIR}/kubectl" --kubeconfig="${KUBECONFIG_PATH}")

# Start order; local-down stops in reverse.
LOCAL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok metrics-server scaleplane-controller-manager scaleplane-webhook prometheus)

# Loopback must never go through an HTTP proxy (apiserver -> webhook, kwok,
# kubectl -> apiserver).
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,${NO_PROXY}}"
export no_proxy="${NO_PROXY}"

# local::pid prints the pid of a running component, or fails. A pid file
# alone proves nothing (pids are reused), so the process's argv[0] must still
# be the binary the pid file names.
local::pid() {
  local name="$1" file="${LOCAL_PIDS}/$1.pid" pid bin argv0
  [[ -f "${file}" ]] || return 1
  read -r pid bin < "${file}" || return 1
  [[ -n "${pid}" && -r "/proc/${pid}/cmdline" ]] || return 1
  # read stops at the first NUL: argv[0], without a pipe.
  IFS= read -r -d '' argv0 < "/proc/${pid}/cmdline" || [[ -n "${argv0}" ]] || return 1
  [[ "${argv0}" == "${bin}" ]] || return 1
  echo "${pid}"
}

# local::ensure runs the start function of a component unless it is running.
local::ensure() {
  local name="$1" start_fn="$2" pid
  if pid="$(local::pid "${name}")"; then
    scaleplane::log "${name}: already running (pid ${pid})"
    return
  fi
  "${start_fn}"
}

# local::start runs a binary in the background, in a session of its own so
# that neither a Ctrl-C in the terminal nor the end of `make` reaches it, with
# its output appended to logs/<name>.log.
local::start() {
  local name="$1" bin="$2"
  shift 2
  local log="${LOCAL_LOGS}/${name}.log"
  echo "### $(date -u +'%Y-%m-%dT%H:%M:%SZ') ${bin} $*" >> "${log}"
  # setsid does not fork here (a background job of a script is not a process
  # group leader), so $! is the component's own pid.
  setsid "${bin}" "$@" >> "${log}" 2>&1 < /dev/null &
  local pid=$!
  echo "${pid} ${bin}" > "${LOCAL_PIDS}/${name}.pid"
  local::wait_exec "${name}" "${pid}" "${bin}"
  scaleplane::log "${name}: started (pid ${pid}), log ${log}"
}

# local::wait_exec waits until pid runs bin. Right after the fork the child
# is still a copy of this shell, then setsid, then bin: on a loaded machine
# that takes a while, and local::pid (which checks argv[0]) would call a
# component that is merely starting "exited". A child that dies before it
# gets there (bin missing, say) ends the wait too; local::wait_cmd reports it.
local::wait_exec() {
  local name="$1" pid="$2" bin="$3" argv0 i
  for ((i = 0; i < 600; i++)); do
    [[ -r "/proc/${pid}/cmdline" ]] || return 0
    argv0=""
    IFS= read -r -d '' argv0 < "/proc/${pid}/cmdline" 2>/dev/null || true
    [[ "${argv0}" == "${bin}" ]] && return 0
    sleep 0.05
  done
  scaleplane::log "${name}: pid ${pid} has not started ${bin} after 30s"
}

# local::has_flag succeeds if the binary's --help lists --name. The help text
# is read whole before it is searched: piping it into `grep -q` lets grep exit
# at the first match, the binary then dies of SIGPIPE, and under pipefail the
# flag would be reported missing (about 1 run in 10).
local::has_flag() {
  local bin="$1" name="$2" help
  help="$("${bin}" --help 2>&1)" || true
  grep -qE -- "--${name}[ =]" <<<"${help}"
}

# local::stop terminates a component (its whole session) and waits for it.
local::stop() {
  local name="$1" pid i
  if ! pid="$(local::pid "${name}")"; then
    rm -f "${LOCAL_PIDS}/${name}.pid"
    return
  fi
  kill -TERM -- "-${pid}" 2>/dev/null || kill -TERM "${pid}" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "${pid}" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "${pid}" 2>/dev/null; then
    scaleplane::log "${name}: did not stop in 20s, killing it"
    kill -KILL -- "-${pid}" 2>/dev/null || kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${LOCAL_PIDS}/${name}.pid"
  scaleplane::log "${name}: stopped (pid ${pid})"
}

local::port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# local::wait_cmd polls a command until it succeeds; on timeout it fails with
# the tail of the component's log, if the name is a component.
local::wait_cmd() {
  local name="$1" timeout="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [[ -f "${LOCAL_PIDS}/${name}.pid" ]] && ! local::pid "${name}" >/dev/null; then
      tail -n 30 "${LOCAL_LOGS}/${name}.log" >&2 || true
      scaleplane::fatal "${name} exited; log: ${LOCAL_LOGS}/${name}.log"
    fi
    if (( SECONDS >= deadline )); then
      [[ -f "${LOCAL_LOGS}/${name}.log" ]] && tail -n 30 "${LOCAL_LOGS}/${name}.log" >&2
      scaleplane::fatal "timed out after ${timeout}s waiting for ${name}"
    fi
    sleep 0.5
  done
  scaleplane::log "${name}: ready"
}

local::wait_port() {
  local::wait_cmd "$1" "$3" local::port_open "$2"
}

# local::http_ok GETs http://127.0.0.1:PORT/PATH with bash alone and
# succeeds on a 200.
local::http_ok() {
  local port="$1" path="$2" status
  exec 3<>"/dev/tcp/127.0.0.1/${port}" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "${path}" >&3
  read -r -t 5 _ status _ <&3 || status=""
  exec 3<&-
  [[ "${status}" == "200" ]]
}

# local::https_ok does the same over TLS with openssl (needed for the
# certificates anyway). The components' serving certificates are self-signed
# in memory and /healthz is public, so nothing is verified and no credentials
# are sent.
local::https_ok() {
  local port="$1" path="$2"
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "${path}" \
    | timeout 5 openssl s_client -quiet -connect "127.0.0.1:${port}" 2>/dev/null \
    | head -n1 | grep -q ' 200 '
}

local::wait_https() {
  local::wait_cmd "$1" "$4" local::https_ok "$2" "$3"
}
