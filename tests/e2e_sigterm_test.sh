#!/usr/bin/env bash
# Graceful shutdown: a worker sent SIGTERM finishes its current step, reports, deregisters at once
# (no lease wait) and exits; the job fails naming the rank and the step it stopped after. A worker
# sent SIGTERM while it connects leaves at once and the job goes back to the queue. The
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

# SIGTERM while connecting: the worker's peer is frozen (SIGSTOP, its lease still running), so the
# worker waits in the job's connect; it must leave at once, not after the 30 s connect timeout,
# and the job, which measured nothing, goes back to the queue rather than fail.
kill -TERM "${PIDS[2]}"  # the first part's other worker: the job must land on the two below
wait "${PIDS[2]}" || true
start_workers 1
frozen=${PIDS[-1]}
trap 'kill -CONT "$frozen" 2>/dev/null; cleanup' EXIT  # a stopped process ignores the cleanup's SIGTERM
kill -STOP "$frozen"
"$WORKER" --coordinator "$PIPECOORD_ADDR" > "$WORK/connecting.log" 2>&1 &
connecting=$!
PIDS+=("$connecting")
for _ in $(seq 100); do grep -q "registered as" "$WORK/connecting.log" && break; sleep 0.05; done
job_json "$WORK/two.json" steps=3
two=$("$PIPECTL" submit "$WORK/two.json" --format json | json_field '["jobId"]')
for _ in $(seq 100); do grep -q "$two: running rank" "$WORK/connecting.log" && break; sleep 0.05; done
grep -q "$two: running rank" "$WORK/connecting.log" || fail "the job did not reach the connecting worker"
sleep 0.3  # in Connect, waiting for the frozen peer
start=$(date +%s%N)
kill -TERM "$connecting"
for _ in $(seq 100); do kill -0 "$connecting" 2>/dev/null || break; sleep 0.05; done
kill -0 "$connecting" 2>/dev/null && fail "the connecting worker did not exit within 5 s of SIGTERM"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep -q "shutting down: leaving $two before it started (it goes back to the queue)" "$WORK/connecting.log" \
  || fail "no quiet leave logged: $(cat "$WORK/connecting.log")"
"$PIPECTL" status "$two" --format json > "$WORK/two.json.status"
/usr/bin/python3 - "$WORK/two.json.status" <<'PY' || fail "the job after SIGTERM in connect: $(head -c 800 "$WORK/two.json.status")"
import json, sys
job = json.load(open(sys.argv[1]))
assert job["state"] == "PENDING", job["state"]
assert job.get("restarts", 0) == 0, job
assert job["events"][-1]["message"].startswith("back in the queue (worker "), job["events"][-1]
assert job["events"][-1]["message"].endswith(" shut down, before its first step)"), job["events"][-1]
PY
kill -CONT "$frozen"
echo "sigterm while connecting: the worker left after ${ms} ms; the job is back in the queue"

kill -TERM "${PIDS[0]}"
rc=0
for _ in $(seq 50); do kill -0 "${PIDS[0]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${PIDS[0]}" 2>/dev/null && fail "the coordinator did not exit within 5 s of SIGTERM"
wait "${PIDS[0]}" || rc=$?
[ "$rc" = 0 ] || fail "the coordinator exited $rc on SIGTERM"
for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()
trap cleanup EXIT

# A coordinated graceful stop (a node drain): SIGTERM to the worker of rank 1 of a job that saves
# a checkpoint every 5 steps; every rank stops after the same step and checkpoints it, and the job
# resumes there on the spare worker, with no restart used: every step once, losses equal to an
# uninterrupted run's.
CKPT="$WORK/drain-checkpoints"
start_coordinator
start_workers 3 --checkpoint-dir "$CKPT"
steps=200
job_json "$WORK/drain-ref.json" steps=$steps
ref=$("$PIPECTL" submit "$WORK/drain-ref.json" --format json | json_field '["jobId"]')
timeout 120 "$PIPECTL" watch "$ref" > /dev/null || fail "the uninterrupted run failed"
job_json "$WORK/drain.json" steps=$steps checkpointEvery=5 maxRestarts=0
drain=$("$PIPECTL" submit "$WORK/drain.json" --format json | json_field '["jobId"]')
wait_steps "$drain" 7
victim=$("$PIPECTL" workers --format json | /usr/bin/python3 -c '
import json, sys
print([w for w in json.load(sys.stdin)["workers"] if w.get("jobId") and w.get("rank", 0) == 1][0]["workerId"])')
worker_process "$victim"
victim_pid=$WORKER_PID victim_log=$WORKER_LOG
kill -TERM "$victim_pid"
timeout 120 "$PIPECTL" watch "$drain" > "$WORK/drain.out" || fail "the drained job did not succeed: $(tail -5 "$WORK/drain.out")"
grep -q "shutting down: every rank of $drain stops after step " "$victim_log" || fail "no coordinated stop: $(tail -5 "$victim_log")"
"$PIPECTL" status "$ref" --format json > "$WORK/drain-ref.status.json"
"$PIPECTL" status "$drain" --format json > "$WORK/drain.status.json"
/usr/bin/python3 - "$WORK/drain-ref.status.json" "$WORK/drain.status.json" "$steps" "$victim" <<'PY' || fail "drain checks"
import json, re, sys
ref, job = (json.load(open(p)) for p in sys.argv[1:3])
steps, victim = int(sys.argv[3]), sys.argv[4]
assert job["state"] == "SUCCEEDED", (job["state"], job.get("failureCause"))
assert job.get("restarts", 0) == 0, job.get("restarts")
events = [e["message"] for e in job["events"]]
asked = [m for m in events if m.startswith("worker %s is shutting down: every rank stops after step " % victim)]
assert len(asked) == 1, events
n = int(re.search(r"after step (\d+)", asked[0]).group(1))
done = "drained for worker %s's shutdown: every rank stopped after step %d; resuming from step %d (their checkpoint)" % (victim, n, n + 1)
assert done in events, events
assert job["startStep"] == n + 1, job["startStep"]
assert [s.get("step", 0) for s in job["steps"]] == list(range(steps)), "each step once"
assert [s["loss"] for s in job["steps"]] == [s["loss"] for s in ref["steps"]], "losses differ from the uninterrupted run"
print("drained after step %d (checkpoints every 5): resumed from step %d, no restart, losses equal the uninterrupted run's" % (n, n + 1))
PY
echo "e2e sigterm: ok"
