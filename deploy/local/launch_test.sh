#!/usr/bin/env bash
# The local launcher starts the coordinator and workers with the pods' configuration, a job
# runs on them to the end, and stopping the launcher stops every process it started.
set -euo pipefail
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/launch.XXXXXX")
fail() { echo "FAIL: $*" >&2; tail -20 "$work"/*.log "$work/launch.out" >&2 || true; exit 1; }
launcher=""
trap '[ -z "$launcher" ] || kill "$launcher" 2>/dev/null || true' EXIT

deploy/local/launch.sh --workers 2 --bin "$PWD" --logs "$work" > "$work/launch.out" 2>&1 &
launcher=$!
for _ in $(seq 200); do grep -qs "ready" "$work/launch.out" && break; sleep 0.05; done
grep -q "launch: 2 worker(s) registered, ready" "$work/launch.out" || fail "launcher not ready"
addr=$(sed -n 's/^launch: coordinator at \([^ ]*\).*/\1/p' "$work/launch.out")
export PIPECOORD_ADDR=$addr
# gRPC is TLS as in the pods: the launcher says where its CA and token are.
export PIPECOORD_TLS_CA PIPECOORD_TOKEN
PIPECOORD_TLS_CA=$(sed -n 's/^launch: pipectl: PIPECOORD_TLS_CA=\([^ ]*\) .*/\1/p' "$work/launch.out")
PIPECOORD_TOKEN=$(cat "$(sed -n 's/^launch: pipectl: .* PIPECOORD_TOKEN=$(cat \([^)]*\))$/\1/p' "$work/launch.out")") ||
  fail "no token file named in: $(cat "$work/launch.out")"
[ -n "$PIPECOORD_TLS_CA" ] || fail "no CA named in: $(cat "$work/launch.out")"
metrics=$(sed -n 's/^launch: \/metrics and the dashboard at \(http:[^ ]*\)/\1metrics/p' "$work/launch.out")
/usr/bin/python3 -c 'import sys, urllib.request; sys.exit(b"# TYPE" not in urllib.request.urlopen(sys.argv[1], timeout=5).read())' \
  "$metrics" || fail "no metrics at '$metrics'"

# Workers registered as in the pods: device from pipecoord.env, data endpoint = POD_IP:port.
cli/pipectl workers --format json > "$work/workers.json"
/usr/bin/python3 - "$work/workers.json" <<'PY' || fail "workers"
import json, sys
w = json.load(open(sys.argv[1]))["workers"]
assert len(w) == 2 and all(x["deviceKind"] == "cpu" and x["dataEndpoint"].startswith("127.0.0.1:") for x in w), w
assert sorted(x["workerId"] for x in w) == ["pipecoord-worker-0", "pipecoord-worker-1"], w  # their certificates' names
PY
grep -q "^PIPECOORD_LEASE_MS=5000$" deploy/base/pipecoord.env || fail "expected the lease in pipecoord.env"

cat > "$work/job.json" <<'JSON'
{"name": "launch", "schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 2, "steps": 3,
 "learningRate": 0.01, "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "3"}}
JSON
job=$(cli/pipectl submit "$work/job.json" --format json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["jobId"])')
cli/pipectl watch "$job" > "$work/watch.out" || fail "watch: $(cat "$work/watch.out")"
grep -q SUCCEEDED "$work/watch.out" || fail "job did not succeed"
echo "job $job ran on the launched processes"

# Stopping the launcher stops everything it started.
kill "$launcher"
wait "$launcher" 2>/dev/null || true
launcher=""
sleep 0.2
if pgrep -f "^$PWD/(coordinator/coordinator|worker/daemon/worker) " > "$work/left"; then
  fail "processes left running: $(cat "$work/left")"
fi
if cli/pipectl workers --format json > /dev/null 2>&1; then fail "the coordinator still answers"; fi

# The worker's --advertise takes a host only: HOST:PORT and an unexpanded $(POD_IP) (a pod spec
# without the POD_IP variable) are refused before anything starts.
for bad in 10.0.0.1:29500 '$(POD_IP)' ''; do
  rc=0
  worker/daemon/worker --coordinator=127.0.0.1:1 "--advertise=$bad" > "$work/advertise.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "--advertise: must be a host name or IP address without a port, got \"$bad\"" \
    "$work/advertise.out" || fail "--advertise=$bad: exit $rc, $(cat "$work/advertise.out")"
done

# A process that exits early ends the launch, with its log.
if deploy/local/launch.sh --workers 1 --bin "$work/nowhere" --logs "$work" > "$work/bad.out" 2>&1; then
  fail "launch with missing binaries succeeded"
fi
grep -q "coordinator exited early" "$work/bad.out" || fail "early exit not reported: $(cat "$work/bad.out")"
echo "PASS"
