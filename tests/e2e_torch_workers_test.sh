#!/usr/bin/env bash
# PyTorch workers (python -m pipecoord.torch_worker) under a real coordinator, gloo on loopback:
#  0. the Python token stream equals the C++ one (values the C++ printed), fault rules parse;
#  1. jobs of the reference model (python/examples/reference_stages.py) on pp 2 and pp 4, each of
#     1f1b, interleaved, zbh1 and zbv, train to the losses of a single-process PyTorch run of the
#     same model on the same token stream (relative 1e-5 every step); pp 2 x dp 2 jobs (1f1b, zbh1,
#     interleaved, zbv; a REDUCE_GRAD per stage in the plan) train to the losses of the single
#     process on the replicas' concatenated batch (2 m micro-batches a step); a built-in job is
#     not handed to torch workers (it waits); spec.optimizer (schedule, clipping, decay) with zero 0
#     and 1 against one process running PyTorch's own AdamW, schedulers and clip_grad_norm_;
#     SIGTERM deregisters them;
#  2. a slow torch worker (--inject slow:1:4) is reported by the straggler check, naming rank 1;
#  3. a torch worker killed mid-job: the job FAILED naming the dead rank;
#  4. docs/pytorch.md's complete example (its module and job as written) prints what the docs show,
#     digits and timing-dependent health events aside.
# (That a torch job is never handed to C++ workers is coordinator/worker_registry_test's.)
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"
TORCH_LOGS=()
TORCH_PIDS=()

# start_torch_workers N [flags...]: waits until N workers are registered.
start_torch_workers() {
  local n=$1 log
  shift
  for i in $(seq "$n"); do
    log="$WORK/torch-$i-$RANDOM.log"
    "$PYTHON" -m pipecoord.torch_worker --coordinator "$PIPECOORD_ADDR" --import-path python/examples "$@" > "$log" 2>&1 &
    PIDS+=($!)
    TORCH_PIDS+=($!)
    TORCH_LOGS+=("$log")
  done
  for _ in $(seq 600); do
    [ "$(free_torch_workers)" -ge "$n" ] && return
    sleep 0.05
  done
  fail "torch workers did not register"
}
free_torch_workers() {
  "$PIPECTL" workers --format json | "$PYTHON" -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin).get("workers", []) if w.get("workerKind") == "torch" and not w.get("jobId")))'
}
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  TORCH_PIDS=()
  TORCH_LOGS=()
}
submit() { "$PIPECTL" submit "$1" --format json | json_field '["jobId"]'; }
torch_job() {
  local out=$1
  shift
  job_json "$out" microbatches=8 steps=4 learningRate=0.01 \
    'model={"layers": 8, "hidden": 32, "heads": 4, "vocab": 64, "seqLen": 8, "seed": "11"}' \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}' "$@"
}

# --- 0. The C++ worker's token stream, bit for bit: worker/model/synthetic_data.cc's
#        SyntheticData(3, 64, 8, 2).Batch(5, 3) as the C++ prints it; the --inject rules' errors. ---
"$PYTHON" - <<'PY' || fail "python/pipecoord/synthetic_data.py differs from the C++ stream"
from pipecoord.synthetic_data import SyntheticData
from pipecoord.torch_executor import Faults
inputs, targets = SyntheticData(3, 64, 8, 2).batch(5, 3)
assert inputs.flatten().tolist() == [43, 57, 32, 61, 56, 7, 19, 55, 0, 47, 28, 15, 25, 9, 33, 59], inputs
assert targets.flatten().tolist() == [57, 32, 61, 56, 7, 19, 55, 45, 47, 28, 15, 25, 9, 33, 59, 46], targets
assert Faults("slow:1:4,hang:2:6,corrupt:0:3,slow:3:2:8").rules == [
    ("slow", 1, 4.0, 0), ("hang", 2, 6, 6), ("corrupt", 0, 3, 3), ("slow", 3, 2.0, 8)]
for bad, why in [("oom:1:5", 'KIND must be slow, hang or corrupt on a torch worker, got "oom"'),
                 ("slow:1:0.5", "FACTOR must be a number in [1, 1000], got '0.5'"),
                 ("hang:x:1", "RANK, STEP must be integers and FACTOR a number"),
                 ("hang:1", "must be slow:RANK:FACTOR[:STEP], hang:RANK:STEP or corrupt:RANK:STEP")]:
    try:
        Faults(bad)
        raise SystemExit(f"{bad} accepted")
    except ValueError as e:
        assert str(e) == f"--inject {bad}: {why}", e

# The heartbeat's progress_age_ns (the hang check dates the last progress by it), on an injected
# clock: the time since the position last changed, measured when the snapshot is taken.
from pipecoord import torch_executor
from proto import schedule_pb2, worker_pb2
now = [1_000]
torch_executor.time.monotonic_ns = lambda: now[0]
progress = torch_executor.Progress(worker_pb2.Assignment(job_id="job-1", rank=1))
now[0] = 3_000
assert progress.snapshot().progress_age_ns == 2_000
progress.start(0, 4, schedule_pb2.Action(), 0)  # position (0, 4) at 3000
now[0] = 7_500
progress.input_ready()  # the same position: not progress
progress.done()
snap = progress.snapshot()
assert (snap.action_index, snap.progress_age_ns) == (4, 4_500), snap
PY

# --- 1. Losses against one process ---
start_coordinator
start_torch_workers 4
# reference JOB_JSON OUT: the losses of the single-process run of JOB_JSON's model and steps.
reference() {
"$PYTHON" - "$1" > "$2" <<'PY' || fail "the single-process run failed"
# The whole model in one process, plain PyTorch: m micro-batches, loss / m backward, AdamW. With
# dp replicas, replica d reads the step's micro-batches d*m .. d*m+m-1 and their gradients are
# averaged: one process on the concatenated batch, all dp*m micro-batches, loss / (dp*m).
import json, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, "python/examples")
from reference_stages import build_stage
from pipecoord.stage_api import ModelSpec, StageShard
from pipecoord.synthetic_data import SyntheticData
torch.set_num_threads(1)
spec = json.load(open(sys.argv[1]))
m, b, ms = spec["microbatches"] * spec.get("dp", 1), spec["microBatchSize"], spec["model"]
model_spec = ModelSpec(layers=ms["layers"], hidden=ms["hidden"], heads=ms["heads"], vocab=ms["vocab"],
                       seq_len=ms["seqLen"], seed=int(ms["seed"]))
model = build_stage(StageShard(0, 0, ms["layers"], True, True), model_spec)
opt = torch.optim.AdamW(model.parameters(), lr=spec["learningRate"], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
data = SyntheticData(int(ms["seed"]), ms["vocab"], ms["seqLen"], b)
losses = []
for step in range(spec["steps"]):
    total = 0.0
    for mb in range(m):
        tokens, targets = data.batch(step, mb)
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        (loss / m).backward()
        total += loss.item()
    opt.step()
    opt.zero_grad()
    losses.append(total / m)
print(json.dumps(losses))
PY
}
torch_job "$WORK/ref.json"
reference "$WORK/ref.json" "$WORK/reference.json"
echo "single process: $(cat "$WORK/reference.json")"
torch_job "$WORK/ref-dp.json" dp=2
reference "$WORK/ref-dp.json" "$WORK/reference-dp.json"
echo "single process, the dp 2 batch: $(cat "$WORK/reference-dp.json")"

# A built-in job waits for C++ workers: the torch workers are not handed it.
job_json "$WORK/builtin.json" steps=1
builtin=$(submit "$WORK/builtin.json")
for pp in 2 4; do
  for schedule in 1f1b interleaved zbh1 zbv; do
    torch_job "$WORK/job.json" pp=$pp "schedule=\"$schedule\""
    job=$(submit "$WORK/job.json")
    timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "pp $pp $schedule: $(tail -3 "$WORK/watch.out")"
    "$PIPECTL" status "$job" --format json > "$WORK/status.json"
    "$PYTHON" - "$WORK/status.json" "$WORK/reference.json" "$pp $schedule" <<'PY' || fail "pp $pp $schedule: losses differ"
import json, sys
job, ref, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
# The plan's numerical probes ran and answered the coordinator's known answer (no SDC event).
ops = [a.get("op") for r in job["plan"]["ranks"] for a in r["actions"]]
assert "PROBE" in ops and ("W" in ops) == (name.split()[1] in ("zbh1", "zbv")), sorted(set(ops))
sdc = [e for e in job.get("events", []) if e.get("kind") == "SDC"]
assert not sdc, sdc
got = [s["loss"] for s in job["steps"]]
assert len(got) == len(ref), (got, ref)
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
print(f"pp {name}: losses {' '.join('%.6f' % g for g in got)}, worst relative difference {worst:.2e}")
assert worst <= 1e-5, (got, ref)
assert ref[-1] < ref[0], ref  # it learns
PY
  done
done
# pp 2 x dp 2 on the four workers: each replica its own micro-batches, each stage's gradients
# averaged at its REDUCE_GRAD (timed like every action: the coordinator's calibration matched the
# plan), the step's loss the replicas' mean.
for schedule in 1f1b zbh1 interleaved zbv; do
  torch_job "$WORK/job.json" pp=2 dp=2 "schedule=\"$schedule\""
  job=$(submit "$WORK/job.json")
  timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "dp 2 $schedule: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  "$PYTHON" - "$WORK/status.json" "$WORK/reference-dp.json" "$WORK/reference.json" "$schedule" <<'PY' ||
import json, sys
job, ref, ref_dp1, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
assert job["spec"]["dp"] == 2, job["spec"]
# One REDUCE_GRAD per stage, on the stage's rank, before the rank's OPT.
for r in job["plan"]["ranks"]:
    ops = [a.get("op") for a in r["actions"]]
    reduced = sorted(a.get("stage", 0) for a in r["actions"] if a.get("op") == "REDUCE_GRAD")
    held = sorted({a.get("stage", 0) for a in r["actions"] if a.get("op") == "F"})
    assert reduced == held, (name, r, reduced, held)
    assert ops.index("OPT") > max(i for i, op in enumerate(ops) if op == "REDUCE_GRAD"), ops
sdc = [e for e in job.get("events", []) if e.get("kind") == "SDC"]
assert not sdc, sdc
got = [s["loss"] for s in job["steps"]]
assert len(got) == len(ref), (got, ref)
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
print(f"pp 2 dp 2 {name}: losses {' '.join('%.6f' % g for g in got)}, worst relative difference {worst:.2e}")
assert worst <= 1e-5, (got, ref)
assert max(abs(g - r) / abs(r) for g, r in zip(got, ref_dp1)) > 1e-3, (got, ref_dp1)  # not one replica's batch
PY
    fail "pp 2 dp 2 $schedule: losses differ"
done
# spec.optimizer and ZeRO-1 on torch workers: pp 2 x dp 2 with betas, eps, weight decay, warmup +
# cosine and clipping, with zero 1 (PyTorch's ZeroRedundancyOptimizer over the replicas) and 0:
# both train to the losses of one process running PyTorch's AdamW, LinearLR + CosineAnnealingLR
# (SequentialLR) and clip_grad_norm_ on the replicas' batch, report its gradient norms and learning
# rates, and zero 1's ranks hold less AdamW state (their reported memory).
OPT='optimizer={"beta1": 0.85, "beta2": 0.98, "eps": 1e-6, "weightDecay": 0.1, "lrSchedule": "cosine", "warmupSteps": 2, "minLr": 0.001, "clipGradNorm": 0.5}'
torch_job "$WORK/opt.json" pp=2 dp=2 'schedule="zbh1"' "$OPT"
"$PYTHON" - "$WORK/opt.json" > "$WORK/reference-opt.json" <<'PY' || fail "the single-process optimizer run failed"
import json, sys, warnings
import torch
import torch.nn.functional as F
sys.path.insert(0, "python/examples")
from reference_stages import build_stage
from pipecoord.stage_api import ModelSpec, StageShard
from pipecoord.synthetic_data import SyntheticData
torch.set_num_threads(1)
warnings.filterwarnings("ignore", message="The epoch parameter", category=UserWarning)
spec = json.load(open(sys.argv[1]))
o, m, b, ms = spec["optimizer"], spec["microbatches"] * spec["dp"], spec["microBatchSize"], spec["model"]
model = build_stage(StageShard(0, 0, ms["layers"], True, True),
                    ModelSpec(layers=ms["layers"], hidden=ms["hidden"], heads=ms["heads"], vocab=ms["vocab"],
                              seq_len=ms["seqLen"], seed=int(ms["seed"])))
params = list(model.parameters())
opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": o["weightDecay"]},
                         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                        lr=spec["learningRate"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])
w = o["warmupSteps"]
sched = torch.optim.lr_scheduler.SequentialLR(opt, [
    torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / w, end_factor=1.0, total_iters=w - 1),
    torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=spec["steps"] - w, eta_min=o["minLr"])], milestones=[w])
data = SyntheticData(int(ms["seed"]), ms["vocab"], ms["seqLen"], b)
out = {"loss": [], "norm": [], "lr": []}
for step in range(spec["steps"]):
    total = 0.0
    for mb in range(m):
        tokens, targets = data.batch(step, mb)
        logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        (loss / m).backward()
        total += loss.item()
    out["norm"].append(float(torch.nn.utils.clip_grad_norm_(params, o["clipGradNorm"])))
    out["lr"].append(opt.param_groups[0]["lr"])
    opt.step()
    sched.step()
    opt.zero_grad()
    out["loss"].append(total / m)
print(json.dumps(out))
PY
for zero in 1 0; do
  torch_job "$WORK/opt.json" pp=2 dp=2 'schedule="zbh1"' "zero=$zero" "$OPT"
  job=$(submit "$WORK/opt.json")
  timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "zero $zero: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status-zero$zero.json"
done
"$PYTHON" - "$WORK/status-zero1.json" "$WORK/status-zero0.json" "$WORK/reference-opt.json" <<'PY' ||
import json, sys
zero1, zero0, ref = (json.load(open(p)) for p in sys.argv[1:4])
for job, name in ((zero1, "zero 1"), (zero0, "zero 0")):
    assert job["state"] == "SUCCEEDED", (name, job.get("failureCause"))
    for key, field in (("loss", "loss"), ("norm", "gradNorm"), ("lr", "learningRate")):
        got = [s[field] for s in job["steps"]]
        worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref[key]))
        print(f"{name} {key}: {' '.join('%.6g' % g for g in got)}, worst relative difference {worst:.2e}")
        assert len(got) == len(ref[key]) and worst <= 1e-5, (name, key, got, ref[key])
assert min(ref["norm"]) > 0.5, ref["norm"]  # every step clipped
# ZeRO-1 keeps about half the AdamW state on each of the 2 replicas: every rank reports less.
peaks1, peaks0 = (list(map(int, j["steps"][-1]["peakMemoryBytes"])) for j in (zero1, zero0))
print(f"peak memory per rank, zero 1 {peaks1} against zero 0 {peaks0}")
assert all(a < b for a, b in zip(peaks1, peaks0)), (peaks1, peaks0)
PY
  fail "spec.optimizer / ZeRO-1 on torch workers"
[ "$("$PIPECTL" status "$builtin" --format json | json_field '["state"]')" = PENDING ] || fail "a built-in job ran on torch workers"
"$PIPECTL" cancel "$builtin" > /dev/null
# SIGTERM: every torch worker deregisters (the workers first, while the coordinator still listens).
for p in "${TORCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${TORCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
stop_all
for log in "$WORK"/torch-*.log; do grep -q "deregistered worker-" "$log" || fail "no deregistration in $log"; done

# --- 1b. Tensor parallelism: the stage builder splits its module over the group it is handed
#         (reference_stages.py, PyTorch's DTensor styles): tp 2 x pp 2 (1f1b, zbv) train to the
#         single-process losses and report the tp 1 job's gradient norms (zbv also with full
#         recompute); tp 2 x dp 2, with and without ZeRO-1, to the replicas' batch's; a builder that returns whole modules at tp 2 fails the job by name ---
mkdir -p "$WORK/plain"
cat > "$WORK/plain/plain_stages.py" <<'PY'
from pipecoord.reference_model import Stage
def build_stage(shard, model):  # ignores shard.tp_group: every tp rank would hold the whole stage
    return Stage.from_shard(shard, model)
PY
start_coordinator
start_torch_workers 4 --import-path "$WORK/plain"
torch_job "$WORK/job.json" pp=2 'schedule="1f1b"'
job=$(submit "$WORK/job.json")
timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "tp 1 pp 2: $(tail -3 "$WORK/watch.out")"
"$PIPECTL" status "$job" --format json > "$WORK/tp1.json"
tp_case() {
  local name=$1 ref=$2
  shift 2
  torch_job "$WORK/job.json" tp=2 "$@"
  job=$(submit "$WORK/job.json")
  timeout 180 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "$name: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  "$PYTHON" - "$WORK/status.json" "$ref" "$WORK/tp1.json" "$name" <<'PY' || fail "$name: differs"
import json, sys
job, ref, tp1 = (json.load(open(p)) for p in sys.argv[1:4])
name = sys.argv[4]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
assert job["spec"]["tp"] == 2 and len(job["workerIds"]) == 4, (job["spec"], job["workerIds"])
got = [s["loss"] for s in job["steps"]]
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
assert len(got) == len(ref) and worst <= 1e-5, (got, ref)
line = f"{name}: losses {' '.join('%.6f' % g for g in got)}, worst relative difference {worst:.2e}"
if job["spec"].get("dp", 1) == 1:  # the same batch as the tp 1 job: the same global gradient norms
    norms, norms1 = ([s["gradNorm"] for s in j["steps"]] for j in (job, tp1))
    worst_norm = max(abs(a - b) / b for a, b in zip(norms, norms1))
    assert worst_norm <= 1e-5, (norms, norms1)
    line += f"; grad norms within {worst_norm:.1e} of tp 1's"
print(line)
PY
}
tp_case "tp 2 x pp 2 1f1b" "$WORK/reference.json" pp=2 'schedule="1f1b"'
tp_case "tp 2 x pp 2 zbv" "$WORK/reference.json" pp=2 'schedule="zbv"'
cp "$WORK/status.json" "$WORK/status-zbv.json"
tp_case "tp 2 x dp 2 1f1b" "$WORK/reference-dp.json" pp=1 dp=2 'schedule="1f1b"'
# Full recompute (PyTorch's activation checkpointing of each block), with tp and the B/W split.
tp_case "tp 2 x pp 2 zbv recompute full" "$WORK/reference.json" pp=2 'schedule="zbv"' 'recompute="full"'
"$PYTHON" - "$WORK/status.json" "$WORK/status-zbv.json" <<'PY' || fail "full recompute: memory"
import json, sys
full, none = (json.load(open(p)) for p in sys.argv[1:3])
# Every step's loss is none's, bit for bit; every rank's peak (its kept graphs) is lower.
assert [s["loss"] for s in full["steps"]] == [s["loss"] for s in none["steps"]], (full["steps"], none["steps"])
pf, pn = (list(map(int, j["steps"][-1]["peakMemoryBytes"])) for j in (full, none))
print(f"full recompute: the same losses bit for bit; peak memory per rank {pf} against none's {pn}")
assert all(a < b for a, b in zip(pf, pn)), (pf, pn)
PY
# ZeRO-1 under tp: ZeroRedundancyOptimizer steps each DTensor parameter's local shard.
tp_case "tp 2 x dp 2 zero 1" "$WORK/reference-dp.json" pp=1 dp=2 zero=1 'schedule="1f1b"'
torch_job "$WORK/job.json" tp=2 pp=2 'worker={"kind": "torch", "module": "plain_stages:build_stage"}'
job=$(submit "$WORK/job.json")
timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" 2>&1 && fail "a builder without tensor parallelism ran at tp 2"
"$PIPECTL" status "$job" --format json | json_field '["failureCause"]' > "$WORK/cause.txt"
grep -qE "returned a module without tensor-parallel \(DTensor\) parameters for stage [01] at tp 2" "$WORK/cause.txt" ||
  fail "tp 2 with a plain builder: $(cat "$WORK/cause.txt")"
echo "tp 2 with a builder that ignores the group: $(cut -c1-160 "$WORK/cause.txt")"
stop_all

# --- 2. A slow torch worker: the straggler check names it ---
start_coordinator
start_torch_workers 2 --inject slow:1:4
torch_job "$WORK/slow.json" steps=12 'health={"bubbleMinS": 0.001, "bubbleSlack": 0.3, "stragglerMinDeltaS": 0.0001}'
job=$(submit "$WORK/slow.json")
timeout 180 "$PIPECTL" watch "$job" > /dev/null || fail "the slow job failed"
"$PIPECTL" events "$job" --kind health --format json > "$WORK/events.json"
"$PYTHON" - "$WORK/events.json" <<'PY' || fail "no straggler event for rank 1: $(cat "$WORK/events.json")"
import json, sys
text = open(sys.argv[1]).read()
events = json.loads(text)["events"] if text.lstrip().startswith("{") else [json.loads(l) for l in text.splitlines() if l.strip()]
stragglers = [e for e in events if e.get("kind") == "STRAGGLER"]
assert stragglers, events
# The injected straggler is found first; a later event for rank 0 would be its own process
# slowed by the machine's load (docs/monitoring.md), shown, not failed.
assert stragglers[0].get("rank", 0) == 1, stragglers
print("straggler:", stragglers[0]["message"])
for e in stragglers[1:]:
    print("also:", e["message"])
PY
stop_all

# --- 3. A torch worker killed mid-job: the job fails naming its rank ---
start_coordinator --lease-ms 2000
start_torch_workers 2
torch_job "$WORK/long.json" steps=100000
job=$(submit "$WORK/long.json")
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')" -ge 2 ] && break
  sleep 0.05
done
read -r victim_id rank < <("$PIPECTL" workers --format json | "$PYTHON" -c '
import json, sys
w = [w for w in json.load(sys.stdin)["workers"] if w.get("rank", 0) == 1][0]
print(w["workerId"], w["rank"])')
victim_pid=""
for i in "${!TORCH_LOGS[@]}"; do
  grep -q "registered as $victim_id," "${TORCH_LOGS[$i]}" && victim_pid=${PIDS[$((i + 1))]}
done
[ -n "$victim_pid" ] || fail "no process for $victim_id"
kill -KILL "$victim_pid"
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '["state"]')" = FAILED ] && break
  sleep 0.05
done
"$PIPECTL" status "$job" --format json > "$WORK/status.json"
[ "$(json_field '["state"]' < "$WORK/status.json")" = FAILED ] || fail "the job did not fail after the kill"
cause=$(json_field '["failureCause"]' < "$WORK/status.json")
[[ "$cause" == *"$victim_id (rank $rank) lost its lease"* ||
   "$cause" == "rank $rank ($victim_id, global rank $rank) stopped answering its peers: "* ]] ||
  fail "the cause does not name the dead rank $rank ($victim_id): $cause"
echo "killed: $cause"
stop_all

# --- 3b. The coordinator killed and started again mid-job: the torch workers train on ---
start_coordinator --state "$WORK/state.db" --lease-ms 2000
coordinator_pid=${PIDS[-1]}
ADDR=$PIPECOORD_ADDR
start_torch_workers 2
torch_job "$WORK/ride-ref.json" steps=200
ref=$(submit "$WORK/ride-ref.json")
timeout 300 "$PIPECTL" watch "$ref" > /dev/null || fail "the uninterrupted torch run failed"
torch_job "$WORK/ride.json" steps=200
job=$(submit "$WORK/ride.json")
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')" -ge 3 ] && break
  sleep 0.05
done
kill -KILL "$coordinator_pid"
wait "$coordinator_pid" 2>/dev/null || true
sleep 3  # longer than the lease: the old rule stopped the job here
: > "$WORK/coordinator.log"
"$COORDINATOR" --listen "$ADDR" --state "$WORK/state.db" --lease-ms 2000 > "$WORK/coordinator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/coordinator.log" && break; sleep 0.05; done
timeout 300 "$PIPECTL" watch "$job" > "$WORK/ride.out" || fail "the torch job did not survive the coordinator restart: $(tail -3 "$WORK/ride.out")"
"$PIPECTL" status "$ref" --format json > "$WORK/ride-ref.status.json"
"$PIPECTL" status "$job" --format json > "$WORK/ride.status.json"
"$PYTHON" - "$WORK/ride-ref.status.json" "$WORK/ride.status.json" <<'PY' || fail "torch coordinator restart checks"
import json, sys
ref, job = (json.load(open(p)) for p in sys.argv[1:3])
assert job["state"] == "SUCCEEDED" and job.get("restarts", 0) == 0, (job["state"], job.get("restarts"))
assert [s.get("step", 0) for s in job["steps"]] == list(range(200)), "each step once"
assert [s["loss"] for s in job["steps"]] == [s["loss"] for s in ref["steps"]], "losses differ from the uninterrupted run"
assert any(e["message"].startswith("re-adopted after the coordinator restart") for e in job["events"])
print("torch workers rode out the coordinator restart: 200 steps once, losses equal the uninterrupted run's")
PY
grep -q "the coordinator took the job back; it goes on" "$WORK"/torch-*.log || fail "no torch worker says it was re-adopted"
stop_all

# --- 4. docs/pytorch.md's example ---
mkdir -p "$WORK/example"
"$PYTHON" - docs/pytorch.md "$WORK/example" <<'PY' || fail "docs/pytorch.md: example blocks not found"
import os, re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
for name in ("tiny_lm.py", "job.json", "output"):
    m = re.search(r"<!-- example: " + re.escape(name) + r" -->\n```\w+\n(.*?)```", text, re.S)
    open(os.path.join(out, name), "w").write(m.group(1))
PY
start_coordinator
start_torch_workers 2 --import-path "$WORK/example"
{ "$PIPECTL" submit "$WORK/example/job.json" && timeout 120 "$PIPECTL" watch job-000001; } > "$WORK/example.out" 2>&1 ||
  fail "the docs example failed: $(tail -3 "$WORK/example.out")"
"$PYTHON" - "$WORK/example.out" "$WORK/example/output" <<'PY' || fail "docs/pytorch.md's example prints something else"
import re, sys
# Health events and the steady-state recalibration depend on this machine's timing, not the example.
health = re.compile(r"^job-\d+: ((bubble|straggler|hang|memory|sdc): |calibrated again ).*\n", re.M)
norm = lambda s: re.sub(r"\d+", "N", health.sub("", s))
got, shown = (open(p).read() for p in sys.argv[1:3])
if norm(got) != norm(shown):
    sys.exit(f"--- docs show\n{shown}--- it printed\n{got}")
losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", got)]
assert len(losses) == 20 and losses[-1] < 0.5 * losses[0], losses  # it learns
print(f"docs example: loss {losses[0]} -> {losses[-1]}")
PY
echo "e2e torch workers: ok"
