# Shared by the end-to-end tests: start a coordinator and workers on loopback (free ports), stop
# everything on exit. Tests run from Bazel's runfiles root, where the binaries are data deps.
set -euo pipefail
COORDINATOR=${COORDINATOR:-coordinator/coordinator}
WORKER=${WORKER:-worker/daemon/worker}
PIPECTL=${PIPECTL:-cli/pipectl}
source tests/python.sh  # PYTHON
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/e2e.XXXXXX")
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}

# start_coordinator [flags...]: sets PIPECOORD_ADDR.
start_coordinator() {
  # Emptied here, not only by the background redirection: a second start (a new scenario) must
  # not read the previous coordinator's "listening on" before the new process truncates the file.
  : > "$WORK/coordinator.log"
  "$COORDINATOR" --listen 127.0.0.1:0 "$@" > "$WORK/coordinator.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q "listening on" "$WORK/coordinator.log" && break; sleep 0.05; done
  PIPECOORD_ADDR=$(sed -n 's/coordinator listening on //p' "$WORK/coordinator.log")
  [ -n "$PIPECOORD_ADDR" ] || fail "coordinator did not start"
  export PIPECOORD_ADDR
}

# start_torch_workers N [flags...]: N PyTorch workers (python -m pipecoord.torch_worker, with
# python/examples importable; the caller puts the stubs and python/ on PYTHONPATH); waits until N
# free torch workers are registered.
start_torch_workers() {
  local n=$1
  shift
  for i in $(seq "$n"); do
    "$PYTHON" -m pipecoord.torch_worker --coordinator "$PIPECOORD_ADDR" --import-path python/examples "$@" \
      > "$WORK/torch-$i-$RANDOM.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 600); do
    [ "$("$PIPECTL" workers --format json | "$PYTHON" -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin).get("workers", []) if w.get("workerKind") == "torch" and not w.get("jobId")))')" -ge "$n" ] && return
    sleep 0.05
  done
  fail "torch workers did not register"
}

# start_workers N [worker flags...]
start_workers() {
  local n=$1
  shift
  for i in $(seq "$n"); do
    "$WORKER" --coordinator "$PIPECOORD_ADDR" "$@" > "$WORK/worker-$i-$RANDOM.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 100); do
    [ "$("$PIPECTL" workers --format json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("workers", [])))')" -ge "$n" ] && return
    sleep 0.05
  done
  fail "workers did not register"
}

# job_json FILE key=value...: writes a small JobSpec with overrides (JSON values).
job_json() {
  local out=$1
  shift
  /usr/bin/python3 - "$out" "$@" <<'PY'
import json, sys
spec = {"name": "e2e", "schedule": "1f1b", "pp": 2, "microbatches": 4, "microBatchSize": 2,
        "steps": 4, "learningRate": 0.01,
        "model": {"layers": 4, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "3"}}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    target = spec
    *path, last = k.split(".")
    for p in path:
        target = target.setdefault(p, {})
    target[last] = json.loads(v)
json.dump(spec, open(sys.argv[1], "w"))
PY
}

# json_field FIELD < json
json_field() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }

# wait_steps JOB N: until JOB has measured N steps (30 s at most; the caller checks what it needs).
wait_steps() {
  for _ in $(seq 600); do
    [ "$("$PIPECTL" status "$1" --format json | json_field '.get("stepsDone", 0)')" -ge "$2" ] && return
    sleep 0.05
  done
}

# worker_process ID: sets WORKER_PID and WORKER_LOG to the process of this run (PIDS) that
# registered as worker ID (ids restart with each coordinator: only live processes are looked at).
worker_process() {
  WORKER_PID="" WORKER_LOG=""
  local pid log
  for pid in "${PIDS[@]}"; do
    log=$(readlink -f "/proc/$pid/fd/2" 2>/dev/null) || continue
    if grep -q "registered as $1," "$log" 2>/dev/null; then WORKER_PID=$pid WORKER_LOG=$log; fi
  done
  [ -n "$WORKER_PID" ] || fail "no process registered as $1"
}
