# Shared by the health and failure tests (after tests/lib.sh): workers with injected faults, one
# scenario after another on fresh processes, the health events of a job, a worker killed mid-job.

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

# kill_and_wait_failed JOB PID: SIGKILLs PID (a worker holding a rank of JOB), waits until JOB is
# FAILED (fails the test otherwise) and sets KILL_TO_FAILED_MS to the milliseconds from the kill to
# the coordinator's own timestamp of the FAILED event, so the latency does not depend on how often
# this looks. Leaves the job's final status in $WORK/status.json. Runs in the test's shell (not in
# $(...), where set -e would not hold), hence a variable rather than output.
KILL_TO_FAILED_MS=
kill_and_wait_failed() {
  local job=$1 pid=$2
  local kill_ms
  kill_ms=$(date +%s%3N)
  kill -KILL "$pid"
  for _ in $(seq 600); do
    [ "$("$PIPECTL" status "$job" --format json | json_field '["state"]')" = "FAILED" ] && break
    sleep 0.05
  done
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  [ "$(json_field '["state"]' < "$WORK/status.json")" = "FAILED" ] || fail "the job did not fail after the kill"
  local failed_ms
  failed_ms=$(/usr/bin/python3 -c '
import json, sys
events = [e for e in json.load(sys.stdin)["events"] if e.get("kind") == "LIFECYCLE" and e["message"].startswith("FAILED")]
print(events[-1]["unixMs"])' < "$WORK/status.json")
  KILL_TO_FAILED_MS=$((failed_ms - kill_ms))
}

# wait_state JOB SECONDS: until the job is terminal; prints its state.
wait_state() {
  local state=""
  for _ in $(seq $(($2 * 20))); do
    state=$("$PIPECTL" status "$1" --format json | json_field '.get("state", "")')
    case "$state" in SUCCEEDED|FAILED|CANCELLED) break ;; esac
    sleep 0.05
  done
  echo "$state"
}
