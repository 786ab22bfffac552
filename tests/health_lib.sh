# Shared by the health tests (after tests/lib.sh): workers with injected faults, one scenario
# after another on fresh processes, and the health events of a job.

# start_workers_with N [worker flags...]: WORKER_LOGS gets their logs, in the order of PIDS.
WORKER_LOGS=()
start_workers_with() {
  local n=$1
  shift
  local log
  for i in $(seq "$n"); do
    log="$WORK/worker-$i-$RANDOM.log"
    "$WORKER" --coordinator "$PIPECOORD_ADDR" "$@" > "$log" 2>&1 &
    PIDS+=($!)
    WORKER_LOGS+=("$log")
  done
  for _ in $(seq 200); do
    [ "$("$PIPECTL" workers --format json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("workers", [])))')" -ge "$n" ] && return
    sleep 0.05
  done
  fail "workers did not register"
}

# stop_all: ends this scenario's coordinator and workers.
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  WORKER_LOGS=()
}

# submit FILE: prints the job id.
submit() { "$PIPECTL" submit "$1" --format json | json_field '["jobId"]'; }

# wait_event JOB KIND SECONDS: waits until the job has an event of KIND; prints its JSON.
wait_event() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -lt "$deadline" ]; do
    local got
    got=$("$PIPECTL" events "$1" --kind "$2" --format json | /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin).get("events", [])
print(json.dumps(e[0]) if e else "")')
    [ -n "$got" ] && { echo "$got"; return 0; }
    sleep 0.1
  done
  return 1
}

# count_events JOB KIND: how many events of KIND ("health": every kind but LIFECYCLE).
count_events() {
  "$PIPECTL" events "$1" --kind "$2" --format json |
    /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("events", [])))'
}
