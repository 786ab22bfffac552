#!/usr/bin/env bash
# The restart policy over real processes: a worker killed (SIGKILL) mid-job, a replacement started
# (as Kubernetes would), and the job resumes from the last step every rank checkpointed to the
# shared --checkpoint-dir. Its loss curve equals an uninterrupted run's of the same spec, exactly.
source tests/lib.sh
CKPT="$WORK/checkpoints"
start_coordinator --lease-ms 2000
start_workers 1 --checkpoint-dir "$CKPT"
"$WORKER" --coordinator "$PIPECOORD_ADDR" --checkpoint-dir "$CKPT" > "$WORK/victim.log" 2>&1 &
victim=$!
PIDS+=("$victim")
for _ in $(seq 100); do grep -q "registered as" "$WORK/victim.log" && break; sleep 0.05; done
grep -q "registered as" "$WORK/victim.log" || fail "the victim did not register"

steps=300
# The reference: the same spec, never interrupted, no checkpoints.
job_json "$WORK/reference.json" steps=$steps
reference=$("$PIPECTL" submit "$WORK/reference.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$reference" > /dev/null || fail "the reference run failed"

job_json "$WORK/job.json" steps=$steps checkpointEvery=5 maxRestarts=1
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
for _ in $(seq 400); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("checkpointedSteps", 0)')" -ge 10 ] && break
  sleep 0.02
done
kill -KILL "$victim"
done_at_kill=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
[ "$done_at_kill" -lt "$steps" ] || fail "the job finished before the kill; make it longer"
# The replacement, with the same (shared) checkpoint directory.
"$WORKER" --coordinator "$PIPECOORD_ADDR" --checkpoint-dir "$CKPT" > "$WORK/replacement.log" 2>&1 &
PIDS+=($!)
timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "the restarted job did not succeed: $(tail -5 "$WORK/watch.out")"
grep -q "resumed from the checkpoint of step" "$WORK"/replacement.log || fail "the replacement did not resume from a checkpoint"

"$PIPECTL" status "$reference" --format json > "$WORK/reference.status.json"
"$PIPECTL" status "$job" --format json > "$WORK/job.status.json"
/usr/bin/python3 - "$WORK/reference.status.json" "$WORK/job.status.json" "$steps" <<'PY' || fail "restart checks"
import json, sys
ref, job, steps = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert job["state"] == "SUCCEEDED", job["state"]
assert job["restarts"] == 1, job.get("restarts")
start = job["startStep"]
assert start >= 10 and start % 5 == 0, start
restart_events = [e["message"] for e in job["events"] if e["message"].startswith("restarting (1 of 1) from step %d (its checkpoint): " % start)]
assert len(restart_events) == 1, [e["message"] for e in job["events"]]
assert [s.get("step", 0) for s in job["steps"]] == list(range(steps)), "each step once"
want = [s["loss"] for s in ref["steps"]]
got = [s["loss"] for s in job["steps"]]
assert got == want, next((i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b)
print("restarted from step %d after the kill; %d losses equal the uninterrupted run's" % (start, steps))
print(restart_events[0][:200])
PY
grep -q "^restarts  1 of 1 (this attempt from step " <<< "$("$PIPECTL" status "$job")" || fail "pipectl status does not show the restart"
echo "e2e restart policy: ok"
