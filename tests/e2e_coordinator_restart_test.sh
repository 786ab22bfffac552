#!/usr/bin/env bash
# Training survives its coordinator, over real processes: a pp 2 x dp 2 job on 4 CPU workers, the
# only coordinator SIGKILLed mid-job and started again on its state file and port 10 s later. The
# workers train on meanwhile, keep their telemetry and results, register again holding the job,
# and the new coordinator re-adopts it: the job SUCCEEDS with no restart counted, every step
# recorded once, losses equal to an uninterrupted run's bit for bit, and as many measured actions
# as that run (every acknowledged telemetry record there once). pipectl watch and the Python
# client's watch, started before the kill, reconnect and follow the job to its end.
source tests/lib.sh

STATE="$WORK/state.db"
start_coordinator --state "$STATE" --lease-ms 2000
coordinator_pid=${PIDS[-1]}
ADDR=$PIPECOORD_ADDR
start_workers 4

steps=1500
job_json "$WORK/reference.json" steps=$steps dp=2
reference=$("$PIPECTL" submit "$WORK/reference.json" --format json | json_field '["jobId"]')
timeout 300 "$PIPECTL" watch "$reference" > /dev/null || fail "the reference run failed"

job_json "$WORK/job.json" steps=$steps dp=2
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')" -ge 5 ] && break
  sleep 0.02
done
# Two watchers started before the kill follow the job through it: pipectl watch and the Python
# client's watch().
"$PIPECTL" watch "$job" > "$WORK/watcher.out" 2> "$WORK/watcher.err" &
watcher=$!
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
PYTHONPATH="$gen:python" /usr/bin/python3 - "$PIPECOORD_ADDR" "$job" "$WORK/pywatch.reached" > "$WORK/pywatch.out" 2>&1 <<'PY' &
import sys
from pipecoord.client import Client, StepUpdate
client = Client(sys.argv[1])
steps = []
for u in client.watch(sys.argv[2]):
    if not steps and isinstance(u, StepUpdate):
        open(sys.argv[3], "w").close()  # the watch reached the coordinator: the test may kill it
    if isinstance(u, StepUpdate):
        steps.append(u.step)
print("python watch: %d steps, %s" % (len(steps), "each once in order" if steps == list(range(len(steps))) else "NOT in order"))
print("python watch ended: " + client.get(sys.argv[2]).state)
PY
pywatcher=$!
# A watch that never reached a coordinator fails at once (a wrong address is no restart): the kill
# waits until the Python watch has had its first step (its interpreter and grpc take seconds to
# start on a loaded machine).
for _ in $(seq 600); do [ -e "$WORK/pywatch.reached" ] && break; sleep 0.05; done
[ -e "$WORK/pywatch.reached" ] || fail "the Python client's watch had no step in 30 s: $(cat "$WORK/pywatch.out")"
sleep 0.5
done_at_kill=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
[ "$done_at_kill" -ge 5 ] && [ "$done_at_kill" -lt "$steps" ] || fail "steps done at the kill: $done_at_kill"
kill -KILL "$coordinator_pid"
wait "$coordinator_pid" 2>/dev/null || true
killed_at=$(date +%s.%N)
sleep 10
# The same port and state file (a pod restarted behind its Service).
: > "$WORK/coordinator.log"
"$COORDINATOR" --listen "$ADDR" --state "$STATE" --lease-ms 2000 > "$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/coordinator.log" && break; sleep 0.05; done
grep -q "listening on" "$WORK/coordinator.log" || fail "the coordinator did not start again"
state_after=$("$PIPECTL" status "$job" --format json | json_field '["state"]')
echo "killed after step $done_at_kill; the new coordinator found the job $state_after"
timeout 300 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "the job did not succeed: $(tail -5 "$WORK/watch.out")"
ended_at=$(date +%s.%N)
wait "$watcher" || fail "pipectl watch did not exit 0 through the restart: $(tail -3 "$WORK/watcher.err")"
grep -q "lost the coordinator" "$WORK/watcher.err" && grep -q "reached the coordinator again" "$WORK/watcher.err" ||
  fail "pipectl watch did not say it reconnected: $(cat "$WORK/watcher.err")"
[ "$(grep -c "^$job step " "$WORK/watcher.out")" = "$steps" ] || fail "pipectl watch did not show each step once"
[ "$(grep "^$job step " "$WORK/watcher.out" | sed 's/^[^ ]* step \([0-9]*\)\/.*/\1/' | sort -n | uniq | wc -l)" = "$steps" ] ||
  fail "pipectl watch repeated a step"
wait "$pywatcher" || fail "the Python client's watch failed: $(cat "$WORK/pywatch.out")"
grep -qx "python watch: $steps steps, each once in order" "$WORK/pywatch.out" &&
  grep -qx "python watch ended: SUCCEEDED" "$WORK/pywatch.out" || fail "Python client's watch: $(cat "$WORK/pywatch.out")"

"$PIPECTL" status "$reference" --format json > "$WORK/reference.status.json"
"$PIPECTL" status "$job" --format json > "$WORK/job.status.json"
"$PIPECTL" trace "$reference" --out "$WORK/reference.trace.json" > /dev/null || fail "trace of the reference"
"$PIPECTL" trace "$job" --out "$WORK/job.trace.json" > /dev/null || fail "trace of the job"
/usr/bin/python3 - "$WORK" "$steps" "$killed_at" "$ended_at" <<'PY' || fail "coordinator restart checks"
import json, sys
work, steps, killed_at, ended_at = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ref = json.load(open(work + "/reference.status.json"))
job = json.load(open(work + "/job.status.json"))
assert job["state"] == "SUCCEEDED", (job["state"], job.get("failureCause"))
assert job.get("restarts", 0) == 0, job.get("restarts")
assert job.get("startStep", 0) == 0, job.get("startStep")
assert [s.get("step", 0) for s in job["steps"]] == list(range(steps)), "each step once, in order"
want = [s["loss"] for s in ref["steps"]]
got = [s["loss"] for s in job["steps"]]
assert got == want, next((i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b)
events = [e["message"] for e in job["events"]]
assert any(m.startswith("the coordinator restarted (epoch 2): waiting up to ") for m in events), events
assert any(m.startswith("re-adopted after the coordinator restart: all 4 rank(s) back") for m in events), events
assert not any(m.startswith(("restarting", "back in the queue", "FAILED")) for m in events), events

def measured(path):
    return sum(1 for e in json.load(open(path))["traceEvents"] if e.get("pid") == 0 and e.get("ph") == "X")
n_ref, n_job = measured(work + "/reference.trace.json"), measured(work + "/job.trace.json")
assert n_job == n_ref, ("measured actions", n_job, "uninterrupted", n_ref)
print("%d steps, losses equal the uninterrupted run's, %d measured actions as it had, no restart; "
      "%.1f s from the kill to the job's end (10 s of it without a coordinator)" % (steps, n_job, ended_at - killed_at))
PY
grep -q "the coordinator took the job back; it goes on" "$WORK"/worker-*.log || fail "no worker says it was re-adopted"

# A job that ends while no coordinator runs: its ranks keep their telemetry and results until one
# answers again, then the job is recorded SUCCEEDED with every step.
short=200
job_json "$WORK/short.json" steps=$short dp=2
quick=$("$PIPECTL" submit "$WORK/short.json" --format json | json_field '["jobId"]')
wait_steps "$quick" 3
coordinator_pid=${PIDS[-1]}
kill -KILL "$coordinator_pid"
wait "$coordinator_pid" 2>/dev/null || true
# Until every rank's run has ended (each then waits to deliver its telemetry and result).
for _ in $(seq 600); do
  [ "$(grep -l "$quick: its run ended; " "$WORK"/worker-*.log 2>/dev/null | wc -l)" -ge 4 ] && break
  sleep 0.1
done
[ "$(grep -l "$quick: its run ended; " "$WORK"/worker-*.log | wc -l)" -ge 4 ] || fail "the short job did not end without a coordinator"
: > "$WORK/coordinator.log"
"$COORDINATOR" --listen "$ADDR" --state "$STATE" --lease-ms 2000 > "$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/coordinator.log" && break; sleep 0.05; done
timeout 120 "$PIPECTL" watch "$quick" > /dev/null || fail "the job that ended without a coordinator: $("$PIPECTL" status "$quick" | head -5)"
"$PIPECTL" status "$quick" --format json > "$WORK/quick.json"
/usr/bin/python3 - "$WORK/quick.json" "$short" <<'PY' || fail "the job that ended without a coordinator"
import json, sys
job, steps = json.load(open(sys.argv[1])), int(sys.argv[2])
assert job["state"] == "SUCCEEDED" and job.get("restarts", 0) == 0, (job["state"], job.get("restarts"))
assert [s.get("step", 0) for s in job["steps"]] == list(range(steps)), "each step once"
print("a job that ended while no coordinator ran: SUCCEEDED, %d steps once, no restart" % steps)
PY
echo "e2e coordinator restart: ok"
