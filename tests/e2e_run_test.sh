#!/usr/bin/env bash
# Submit -> run -> succeed over real processes: a coordinator, workers, pipectl.
source tests/lib.sh
start_coordinator
start_workers 3

job_json "$WORK/job.json" schedule='"interleaved"' pp=3 vpp=2 microbatches=5 model.layers=7 steps=5
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
[ "$job" = "job-000001" ] || fail "first job id: $job"
"$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "watch exit $?"
grep -q "step 5/5" "$WORK/watch.out" || fail "no progress line for step 5: $(cat "$WORK/watch.out")"
grep -q "SUCCEEDED" "$WORK/watch.out" || fail "no SUCCEEDED event"

"$PIPECTL" status "$job" --format json > "$WORK/status.json"
state=$(json_field '["state"]' < "$WORK/status.json")
[ "$state" = "SUCCEEDED" ] || fail "state $state"
steps=$(json_field '["stepsDone"]' < "$WORK/status.json")
[ "$steps" = "5" ] || fail "steps done $steps"
# Loss falls and every rank reported its peak memory.
/usr/bin/python3 - "$WORK/status.json" <<'PY' || fail "status checks"
import json, sys
job = json.load(open(sys.argv[1]))
losses = [s["loss"] for s in job["steps"]]
assert len(losses) == 5 and losses[-1] < losses[0], losses
assert all(len(s["peakMemoryBytes"]) == 3 for s in job["steps"]), job["steps"][0]
assert all(0 <= s["measuredBubbleRate"] < 1 for s in job["steps"])
assert job["plan"]["stageToRank"] == [0, 1, 2, 0, 1, 2]
# The plan's budget (memory/'s pipecoord-cpu recipe over the job lists) is what every rank
# measured, at every step, to the byte.
budget = [int(b) for b in job["plan"]["memoryBudgetBytes"]]
for s in job["steps"]:
    assert [int(b) for b in s["peakMemoryBytes"]] == budget, (s.get("step", 0), s["peakMemoryBytes"], budget)
PY
grep -qE "^peak mem  measured/predicted: r0 [0-9.]+/[0-9.]+ MiB r1 [0-9.]+/[0-9.]+ MiB r2 [0-9.]+/[0-9.]+ MiB$" <<< "$("$PIPECTL" status "$job")" \
  || fail "status does not show measured and predicted peaks: $("$PIPECTL" status "$job" | grep "peak mem")"

"$PIPECTL" trace "$job" --out "$WORK/trace.json" | grep -q "wrote the trace of $job" || fail "trace"
/usr/bin/python3 - "$WORK/trace.json" <<'PY' || fail "trace contents"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
ranks = {e["tid"] for e in events if e.get("ph") == "X" and e["pid"] == 0}
assert ranks == {0, 1, 2}, ranks
names = {e["name"] for e in events if e.get("ph") == "X"}
assert "F mb4 s5" in names and "predicted idle" in names, sorted(names)[:10]
PY

# The workers are free again and take the next job.
job_json "$WORK/job2.json" pp=3 model.layers=3 steps=2
job2=$("$PIPECTL" submit "$WORK/job2.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job2" > /dev/null || fail "second job did not succeed"
"$PIPECTL" jobs | grep -q "$job2 *SUCCEEDED" || fail "jobs listing"
echo "e2e run: ok"
