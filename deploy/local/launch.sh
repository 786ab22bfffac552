#!/usr/bin/env bash
# The local launcher: the processes the Kubernetes manifests run (one coordinator, N workers) on
# this machine, with the configuration the pods get. It reads the ConfigMap's source,
# deploy/base/pipecoord.env (plus deploy/overlays/OVERLAY/pipecoord.env if that exists), exports
# it to every process as envFrom does, and passes the same flags as the containers' args
# (deploy/base/*.yaml). Only addresses and files differ: everything listens on 127.0.0.1, the
# coordinator and the data ports on free ports (0), so several workers and launches share one
# machine; the Secrets' files (TLS certificates, the token) are a throwaway set made with openssl
# in the log folder (deploy/local/pki.sh), worker N's certificate naming it pipecoord-worker-N as
# the pods' names do.
#   deploy/local/launch.sh [--workers N] [--overlay cpu|gpu] [--bin DIR] [--logs DIR] [--inject RULES] [--dry-run]
# --bin: a folder laid out like bazel-bin (coordinator/coordinator, worker/daemon/worker); by
# default the launcher builds them. Prints "launch: coordinator at HOST:PORT" (and its HTTP
# address for /metrics and the dashboard, and "launch: pipectl: PIPECOORD_TLS_CA=FILE
# PIPECOORD_TOKEN=$(cat FILE)", what clients need), then "launch: N worker(s) registered, ready",
# and runs until SIGINT/SIGTERM or until one of its processes exits; it always stops everything it
# started. --dry-run prints the commands only. --inject passes worker --inject RULES (fault
# injection for demos, docs/monitoring.md) to every worker.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
workers=4 overlay=cpu bin="" logs="" dry_run=0 inject=""
while [ $# -gt 0 ]; do
  case $1 in
    --workers) workers=$2; shift 2 ;;
    --overlay) overlay=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --inject) inject=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "launch: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $workers =~ ^[1-9][0-9]*$ ]] || { echo "launch: --workers must be a positive integer" >&2; exit 2; }
[ -d "$root/deploy/overlays/$overlay" ] || { echo "launch: no overlay deploy/overlays/$overlay" >&2; exit 2; }

# KEY=VALUE lines exactly as kustomize's configMapGenerator reads them (no quoting, no expansion).
load_env() {
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && export "${line?}"
  done < "$1"
}
load_env "$root/deploy/base/pipecoord.env"
[ ! -f "$root/deploy/overlays/$overlay/pipecoord.env" ] || load_env "$root/deploy/overlays/$overlay/pipecoord.env"
# What differs from the pods: loopback addresses and free ports. POD_IP is what the downward API
# gives a pod; the workers advertise it as they do there.
export PIPECOORD_DATA_PORT=0 POD_IP=127.0.0.1

logs=${logs:-$(mktemp -d)}
# As in the pods, the coordinator keeps its state in a file (here in the run's log folder), and
# gRPC runs over TLS: the coordinator's certificate, workers' client certificates, the token.
tls=$logs/tls
coordinator_args=(--listen=127.0.0.1:0 --http=127.0.0.1:0 "--state=$logs/state.db" "--lease-ms=$PIPECOORD_LEASE_MS"
  "--tls-cert=$tls/coordinator.crt" "--tls-key=$tls/coordinator.key" "--tls-ca=$tls/ca.crt"
  "--token-file=$tls/token" --health-listen=127.0.0.1:0)
worker_args() {  # worker_args N: worker N (0-based), pipecoord-worker-N as in the StatefulSet
  echo "--coordinator=$PIPECOORD_ADDR" "--device=$PIPECOORD_DEVICE" \
       "--data-listen=127.0.0.1:$PIPECOORD_DATA_PORT" "--advertise=$POD_IP" \
       "--tls-ca=$tls/ca.crt" "--tls-cert=$tls/pipecoord-worker-$1.crt" "--tls-key=$tls/pipecoord-worker-$1.key" \
       "--checkpoint-dir=$logs/checkpoints" \
       ${inject:+"--inject=$inject"}  # checkpoints: one folder on this host, every worker's 'own disk'
}
if [ "$dry_run" = 1 ]; then
  PIPECOORD_ADDR=COORDINATOR_ADDRESS
  echo "coordinator ${coordinator_args[*]}"
  echo "worker $(worker_args 0)"
  exit 0
fi

# shellcheck source=deploy/local/pki.sh
source "$root/deploy/local/pki.sh"
command -v openssl > /dev/null || { echo "launch: openssl not found (tools/setup.sh installs it)" >&2; exit 1; }
pki_ca "$tls"
pki_server "$tls" coordinator "DNS:localhost,IP:127.0.0.1"
for i in $(seq 0 $((workers - 1))); do pki_worker "$tls" "pipecoord-worker-$i"; done
pki_token "$tls/token"

if [ -z "$bin" ]; then
  if ! out=$(cd "$root" && bazel build //coordinator //worker/daemon:worker 2>&1); then
    grep -E "^(ERROR|FAILED)" <<< "$out" >&2 || echo "$out" >&2
    exit 1
  fi
  bin=$(cd "$root" && bazel info bazel-bin 2>/dev/null)
fi
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
died() { echo "launch: $1 exited early; its log ($2):" >&2; tail -20 "$2" >&2; exit 1; }

"$bin/coordinator/coordinator" "${coordinator_args[@]}" > "$logs/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  grep -qs "listening on" "$logs/coordinator.log" && break
  kill -0 "${pids[0]}" 2>/dev/null || died coordinator "$logs/coordinator.log"
  sleep 0.1
done
PIPECOORD_ADDR=$(sed -n 's/^coordinator listening on //p' "$logs/coordinator.log")
[ -n "$PIPECOORD_ADDR" ] || died coordinator "$logs/coordinator.log"
export PIPECOORD_ADDR
echo "launch: coordinator at $PIPECOORD_ADDR (logs in $logs)"
http=$(sed -n 's/^coordinator http on \([^ ]*\).*/\1/p' "$logs/coordinator.log")
echo "launch: /metrics and the dashboard at http://$http/"
echo "launch: pipectl: PIPECOORD_TLS_CA=$tls/ca.crt PIPECOORD_TOKEN=\$(cat $tls/token)"

for i in $(seq "$workers"); do
  read -ra wargs <<< "$(worker_args $((i - 1)))"
  "$bin/worker/daemon/worker" "${wargs[@]}" > "$logs/worker-$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 200); do
  registered=$(cat "$logs"/worker-*.log 2>/dev/null | grep -c "registered as" || true)
  [ "$registered" -ge "$workers" ] && break
  for i in $(seq "$workers"); do kill -0 "${pids[$i]}" 2>/dev/null || died "worker $i" "$logs/worker-$i.log"; done
  sleep 0.1
done
[ "$registered" -ge "$workers" ] || { echo "launch: only $registered of $workers worker(s) registered" >&2; exit 1; }
echo "launch: $workers worker(s) registered, ready"

# Runs until a signal, or until any process exits (then everything stops).
rc=0
wait -n "${pids[@]}" || rc=$?
echo "launch: a process exited (status $rc); stopping" >&2
exit 1
