#!/usr/bin/env bash
# Graceful shutdown: a worker sent SIGTERM finishes its current step, reports, deregisters at once
# (no lease wait) and exits; the job fails naming the rank and the step it stopped after. The
# coordinator on SIGTERM exits cleanly, and its state file has everything.
source tests/lib.sh
start_coordinator --state "$WORK/state.db"
start_workers 2
worker_pid=${PIDS[1]}

job_json "$WORK/long.json" steps=100000
job=$("$PIPECTL" submit "$WORK/long.json" --format json | json_field '["jobId"]')
for _ in $(seq 200); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')" -ge 2 ] && break
  sleep 0.05
done

kill -TERM "$worker_pid"
for _ in $(seq 100); do kill -0 "$worker_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$worker_pid" 2>/dev/null && fail "the worker did not exit within 10 s of SIGTERM"
grep -q "shutting down: finishing the current step of $job" "$WORK"/worker-*.log || fail "no graceful stop logged"
grep -q "deregistered" "$WORK"/worker-*.log || fail "the worker did not deregister"
# Deregistered: gone from the list at once, not after its 5 s lease.
[ "$("$PIPECTL" workers --format json | json_field '["workers"].__len__()')" = "1" ] || fail "the worker is still listed"

"$PIPECTL" status "$job" --format json > "$WORK/status.json"
/usr/bin/python3 - "$WORK/status.json" <<'PY' || fail "job state after the worker's SIGTERM: $(cat "$WORK/status.json" | head -c 600)"
import json, re, sys
job = json.load(open(sys.argv[1]))
assert job["state"] == "FAILED", job["state"]
cause = job["failureCause"]
m = re.search(r"shutting down: stopped after step (\d+) of 100000", cause)
assert m, cause
# The step it stopped after was measured on this rank (its telemetry went out before it left).
assert int(m.group(1)) >= 1, cause
PY

kill -TERM "${PIDS[0]}"
rc=0
for _ in $(seq 50); do kill -0 "${PIDS[0]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${PIDS[0]}" 2>/dev/null && fail "the coordinator did not exit within 5 s of SIGTERM"
wait "${PIDS[0]}" || rc=$?
[ "$rc" = 0 ] || fail "the coordinator exited $rc on SIGTERM"
echo "e2e sigterm: ok"
