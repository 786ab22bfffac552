#!/usr/bin/env bash
# A ZeRO-1 job (pp 2 x dp 2) loses a worker and no other is free: in-place recovery is refused
# (the lost rank's moment shard is held by no other rank), the restart policy applies, and with
# only three workers left the job restarts with one replica fewer (dp 1, twice the micro-batches:
# the same global batch) from its last checkpoint, each rank gathering the moments it now holds
# from both old replicas' files (docs/operations.md). Then a worker joins: with a replica's worth
# free, the job grows back (every rank stops after a step and checkpoints it; the job resumes at
# dp 2 and ZeRO-1 again, each rank taking its moment shard from the dp 1 files). The job SUCCEEDS
# with one restart (growing is not one), and every step's loss is within 1e-6 relative of an
# uninterrupted run's (the same samples per step; only the order of the gradient's additions
# changes).
source tests/lib.sh
source tests/health_lib.sh

losses() {
  "$PIPECTL" status "$1" --format json | /usr/bin/python3 -c '
import json, sys
steps = json.load(sys.stdin).get("steps", [])
print(json.dumps({s.get("step", 0): float(s.get("loss", 0)) for s in steps}, sort_keys=True))'
}

# Enough steps that the job is still running when the fifth worker has started and registered
# after the restart: at 120 steps (5 ms each on the 2026-11-30 machines) it finished at dp 1 first.
STEPS=600
start_coordinator --lease-ms 2000
start_workers_with 4 --checkpoint-dir "$WORK/checkpoints"
job_json "$WORK/zero.json" pp=2 dp=2 zero=1 schedule='"zbh1"' steps=$STEPS model.layers=4 maxRestarts=1 checkpointEvery=10
base=$(submit "$WORK/zero.json")
[ "$(wait_state "$base" 120)" = SUCCEEDED ] || fail "the uninterrupted run did not succeed"
losses "$base" > "$WORK/base.json"
job=$(submit "$WORK/zero.json")
wait_steps "$job" 25
victim=$("$PIPECTL" status "$job" --format json | json_field "['workerIds'][3]")
worker_process "$victim"
kill -9 "$WORKER_PID"
for _ in $(seq 600); do
  "$PIPECTL" events "$job" --format json | grep -q "restarting with one replica fewer" && break
  sleep 0.1
done
spec_dp() { "$PIPECTL" status "$job" --format json | json_field "['spec'].get('dp', 1)"; }
[ "$(spec_dp)" = 1 ] || fail "the job did not restart at dp 1"
start_workers_with 1 --checkpoint-dir "$WORK/checkpoints"  # a replica's worth free again: 2 workers
[ "$(wait_state "$job" 180)" = SUCCEEDED ] || fail "the job did not succeed: $("$PIPECTL" status "$job" --format json |
  /usr/bin/python3 -c 'import json,sys; [print(e.get("message")) for e in json.load(sys.stdin)["events"]]')"
"$PIPECTL" status "$job" --format json > "$WORK/status.json"
losses "$job" > "$WORK/run.json"
/usr/bin/python3 - "$WORK/status.json" "$WORK/base.json" "$WORK/run.json" "$STEPS" <<'PY' || fail "$(tail -c 2000 "$WORK/status.json")"
import json, sys
status = json.load(open(sys.argv[1]))
base, run = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
events = [e.get("message", "") for e in status.get("events", [])]
steps = int(sys.argv[4])
assert len(run) == steps, f"{len(run)} steps recorded, {steps} expected"
assert status.get("restarts", 0) == 1, f"restarts: {status.get('restarts')}"
assert status["spec"]["dp"] == 2 and status["spec"]["microbatches"] == 4 and status["spec"]["zero"] == 1, status["spec"]
assert any("in place: ZeRO" in m for m in events), events
smaller = [m for m in events if "restarting with one replica fewer, dp 2 -> 1, 8 micro-batches" in m]
assert smaller and "gathers its ZeRO state from the 2 replicas' checkpoints of step " in smaller[0], events
stop = [m for m in events if m.startswith("growing back to dp 2: every rank stops after step ")]
grown = [m for m in events if m.startswith("growing back to dp 2 x 4 micro-batches (ZeRO-1")]
assert stop and grown, events
assert "each rank gathering its moment shard from the 1 replica(s)' checkpoints of step " in grown[0], grown
assert events.index(smaller[0]) < events.index(stop[0]) < events.index(grown[0]), events
print(grown[0])
rel = {int(k): abs(run[k] - base[k]) / abs(base[k]) for k in base}
worst = max(rel.values())
print(f"zero restart: {smaller[0]}; largest relative loss difference over {steps} steps {worst:.2e}")
assert worst <= 1e-6, f"losses differ by {worst:.2e} relative at step {max(rel, key=rel.get)}"
PY
grep -h "gathered\|loaded the checkpoint" "$WORK"/*.log 2>/dev/null | head -3 || true
echo "e2e zero restart: ok"
