#!/usr/bin/env bash
# Schedule "auto" over real processes: pipectl submit --dry-run prints the chosen strategy and
# stores nothing; the same spec submitted runs on the chosen strategy to SUCCEEDED, every rank's
# measured peak equal to the budget the choice was made on; pipectl status shows why; the Python
# client does the same, and gets FailedPrecondition naming the shortfall when a worker reports
# too little memory.
source tests/lib.sh
start_coordinator
start_workers 3 --memory 1GiB
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")

# Each worker lists the memory it offers (--memory).
"$PIPECTL" workers > "$WORK/workers.out"
head -1 "$WORK/workers.out" | grep -q "^WORKER  *DEVICE KIND  *MEMORY  *DATA ENDPOINT" || fail "workers header: $(cat "$WORK/workers.out")"
[ "$(grep -cE "^worker-[0-9]+ +cpu +builtin +1.00 GiB +127.0.0.1:" "$WORK/workers.out")" = 3 ] || fail "workers memory: $(cat "$WORK/workers.out")"

# A tiny model, 8 samples per step, every strategy field left to the coordinator.
job_json "$WORK/auto.json" schedule='"auto"' pp=0 microbatches=0 microBatchSize=0 globalBatch=8 steps=3 \
  health='{"disabled": true}'

# 1. Dry run, text: the choice for 3 free cpu workers that offer 1 GiB each (jobplan/auto_plan_test
#    pins the planner's choices; here the whole path from pipectl to the coordinator and back).
"$PIPECTL" submit --dry-run "$WORK/auto.json" > "$WORK/dry.out" || fail "dry run exit $?: $(cat "$WORK/dry.out")"
head -1 "$WORK/dry.out" | grep -qx "dry run: nothing submitted" || fail "dry run: $(cat "$WORK/dry.out")"
sed -n 2p "$WORK/dry.out" | grep -qx "auto      zbh1, pp 2, vpp 1, dp 1, 8 micro-batches of 1, layers 2/2" \
  || fail "dry run chose otherwise: $(cat "$WORK/dry.out")"
grep -qx "planned   for 3 free cpu worker(s), the smallest reports 1.00 GiB" "$WORK/dry.out" || fail "dry run workers: $(cat "$WORK/dry.out")"
grep -qE "^searched  [0-9]+ strategies: [0-9]+ feasible, 0 pruned for memory$" "$WORK/dry.out" || fail "dry run counts"
[ "$(grep -c "^next best " "$WORK/dry.out")" = 4 ] || fail "dry run: not 4 next best: $(cat "$WORK/dry.out")"
[ "$("$PIPECTL" jobs --format json | json_field '.get("jobs", [])')" = "[]" ] || fail "a dry run stored a job"

# ... json: the SubmitJobResponse, the same choice, no job id.
"$PIPECTL" submit --dry-run "$WORK/auto.json" --format json > "$WORK/dry.json" || fail "dry run json"
/usr/bin/python3 - "$WORK/dry.json" <<'PY' || fail "dry run json: $(cat "$WORK/dry.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert "jobId" not in r, r
spec, chosen = r["spec"], r["autoPlan"]["chosen"]
assert (spec["schedule"], spec["pp"], spec["microbatches"], spec["microBatchSize"], spec["globalBatch"]) == ("zbh1", 2, 8, 1, 8), spec
assert (chosen["schedule"], chosen["pp"], chosen["stageLayers"]) == ("zbh1", 2, [2, 2]), chosen
assert r["autoPlan"]["workers"] == 3 and r["autoPlan"]["deviceKind"] == "cpu", r["autoPlan"]
assert len(r["autoPlan"]["nextBest"]) == 4
PY

# 2. For real: it runs the chosen strategy to the end; each rank's measured peak is its budget,
#    and the tightest is the report's peak.
job=$("$PIPECTL" submit "$WORK/auto.json" --format json | json_field '["jobId"]')
[ "$job" = "job-000001" ] || fail "first job id: $job"
"$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "auto job did not succeed: $(tail -5 "$WORK/watch.out")"
"$PIPECTL" status "$job" --format json > "$WORK/status.json"
/usr/bin/python3 - "$WORK/status.json" "$WORK/dry.json" <<'PY' || fail "auto job status"
import json, sys
job, dry = (json.load(open(p)) for p in sys.argv[1:3])
assert job["state"] == "SUCCEEDED" and job["stepsDone"] == 3, job["state"]
assert job["spec"] == dry["spec"], (job["spec"], dry["spec"])
assert job["autoPlan"]["chosen"] == dry["autoPlan"]["chosen"], job["autoPlan"]["chosen"]
budget = [int(b) for b in job["plan"]["memoryBudgetBytes"]]
for s in job["steps"]:
    assert [int(b) for b in s["peakMemoryBytes"]] == budget, (s["peakMemoryBytes"], budget)
assert int(job["autoPlan"]["chosen"]["peakBytes"]) == max(budget), (job["autoPlan"]["chosen"], budget)
PY
"$PIPECTL" status "$job" > "$WORK/status.out"
grep -qx "auto      zbh1, pp 2, vpp 1, dp 1, 8 micro-batches of 1, layers 2/2" "$WORK/status.out" \
  || fail "status does not show the auto report: $(cat "$WORK/status.out")"
grep -qx "schedule  zbh1, pp 2, vpp 1, dp 1, 8 micro-batches of 1" "$WORK/status.out" || fail "status schedule line"

# 3. No worker of the kind: FAILED_PRECONDITION, exit 1, nothing stored.
job_json "$WORK/cuda.json" schedule='"auto"' pp=0 microbatches=0 microBatchSize=0 globalBatch=8 device='"cuda"'
rc=0
"$PIPECTL" submit --dry-run "$WORK/cuda.json" > /dev/null 2> "$WORK/cuda.err" || rc=$?
[ "$rc" = 1 ] || fail "auto with no free worker: exit $rc"
[ "$(cat "$WORK/cuda.err")" = 'pipectl submit: spec.schedule: "auto" plans for the free workers, and no cuda worker is free now (pipectl workers)' ] \
  || fail "auto with no free worker: $(cat "$WORK/cuda.err")"

# 4. The Python client: dry run, a real run, and a worker that reports too little memory.
PYTHONPATH="$gen:python" timeout 120 /usr/bin/python3 - "$WORK/auto.json" <<'PY' || fail "python client"
import os, sys
from pipecoord import Client, DryRun, FailedPrecondition
from proto import worker_pb2, worker_pb2_grpc
import grpc

spec_path = sys.argv[1]
with Client(os.environ["PIPECOORD_ADDR"]) as c:
    before = len(c.jobs())
    dry = c.submit(spec_path, dry_run=True)
    assert isinstance(dry, DryRun) and dry.auto_plan is not None, dry
    assert (dry.spec.schedule, dry.spec.pp, dry.auto_plan.chosen.schedule) == ("zbh1", 2, "zbh1"), dry
    assert dry.predicted_bubble_rate > 0 and len(c.jobs()) == before
    job_id = c.submit(spec_path)
    job = c.wait(job_id)
    assert job.state == "SUCCEEDED" and job.auto_plan.chosen == dry.auto_plan.chosen, job
    assert job.spec.schedule == "zbh1" and c.get("job-000001").auto_plan is not None
    # A fourth worker that reports 64 KiB: the smallest memory now, and nothing fits it.
    workers = worker_pb2_grpc.WorkerServiceStub(grpc.insecure_channel(os.environ["PIPECOORD_ADDR"]))
    small = workers.Register(worker_pb2.RegisterRequest(device_kind="cpu", host="t", data_endpoint="127.0.0.1:9",
                                                        device_memory_bytes=64 << 10))
    try:
        c.submit(spec_path, dry_run=True)
        raise SystemExit("nothing fits 64 KiB, yet the dry run answered")
    except FailedPrecondition as e:
        assert e.message.startswith('spec.schedule: "auto" found no strategy that fits in memory: rank ') and \
            ", workers report 64.0 KiB (the leanest of " in e.message, e.message
    finally:
        workers.Deregister(worker_pb2.DeregisterRequest(worker_id=small.worker_id))
    assert len(c.jobs()) == before + 1
print("python auto ok")
PY

# 5. A real worker that offers 64 KiB (--memory): the smallest now, and nothing fits it.
"$WORKER" --coordinator "$PIPECOORD_ADDR" --memory 64KiB > "$WORK/small.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 200); do grep -q "registered as" "$WORK/small.log" && break; sleep 0.05; done
rc=0
"$PIPECTL" submit --dry-run "$WORK/auto.json" > /dev/null 2> "$WORK/small.err" || rc=$?
[ "$rc" = 1 ] || fail "nothing fits 64 KiB, yet the dry run exited $rc"
grep -q ', workers report 64.0 KiB (the leanest of ' "$WORK/small.err" || fail "shortfall: $(cat "$WORK/small.err")"
echo "e2e auto: ok"
