#!/usr/bin/env bash
# PyTorch workers' checkpoints (python/pipecoord/torch_checkpoint.py) and the restart policy:
#  0. in one process: a rank's stages saved after step 3 and resumed into fresh modules train
#     steps 4..5 to the same losses, bit for bit; the newest file and the restart point's are
#     kept; a corrupt file, another module, a missing file and another step are refused naming
#     the file and the rule; the same under tensor parallelism (tp 2, two processes: each rank's
#     DTensors' local shards); under ZeRO-1 (dp 2, two processes), resumed at dp 2 and at dp 1;
#  1. under a real coordinator: a pp 2 job with checkpointEvery 2 and maxRestarts 1, one torch
#     worker killed (SIGKILL) mid-job and a replacement started; the job resumes from the last step
#     both ranks checkpointed and its per-step losses equal an uninterrupted run's exactly; the
#     files are the C++ workers' (rank-G/step-N.safetensors, format, step, FNV-1a), and pipectl
#     export turns the reference model's into a Hugging Face folder;
#  2. a job with checkpointEvery on torch workers without --checkpoint-dir fails naming the flag.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"
CKPT="$WORK/checkpoints"

# --- 0. One process ---
"$PYTHON" - "$WORK/unit" <<'PY' || fail "save and resume in one process"
import os, sys
sys.path.insert(0, "python/examples")
import torch
from reference_stages import build_stage
from pipecoord.safetensors_io import read_metadata
from pipecoord.stage_api import ModelSpec, StageShard
from pipecoord.synthetic_data import SyntheticData
from pipecoord.torch_checkpoint import CheckpointWriter, checkpoint_path, fnv1a64, resume
from pipecoord.torch_stages import StageRunner
from proto import job_pb2
torch.set_num_threads(1)
assert fnv1a64(b"") == 0xcbf29ce484222325 and fnv1a64(b"a") == 0xaf63dc4c8601ec8c  # FNV-1a 64's test vectors
d = sys.argv[1]
model = ModelSpec(layers=4, hidden=32, heads=4, vocab=64, seq_len=8, seed=3)
shards = {0: StageShard(0, 0, 2, True, False), 1: StageShard(1, 2, 2, False, True)}
data = SyntheticData(3, 64, 8, 2)

def runner(last_layers=2):  # last_layers: the layers of stage 1 (another module with 1)
    held = dict(shards)
    held[1] = StageShard(1, 2, last_layers, False, True)
    spec = job_pb2.JobSpec(learning_rate=0.01, steps=100)  # a constant learning rate, default AdamW
    return StageRunner({k: build_stage(s, model) for k, s in held.items()}, held, 2, spec, "cpu")

def step(r, n):  # both stages of the rank, two micro-batches, as the executor's F and BW
    for mb in range(2):
        x, y = data.batch(n, mb)
        r.forward(1, mb, r.forward(0, mb, x), y)
        r.backward_full(0, mb, r.backward_full(1, mb, torch.tensor(1.0)))
    r.optimizer_step()
    return r.step_loss()

r, w = runner(), CheckpointWriter(d, "job-1", 3)
w.keep_from_step(1)
losses = []
for n in range(6):
    losses.append(step(r, n))
    if (n + 1) % 2 == 0:
        w.save(r, n)
w.keep_from_step(3)  # the coordinator's restart point moved on: step 1's file goes at the next save
w.save(r, 5)
files = sorted(os.listdir(os.path.join(d, "job-1", "rank-3")))
assert files == ["step-3.safetensors", "step-5.safetensors"], files
meta = read_metadata(checkpoint_path(d, "job-1", 3, 3))
assert {k: meta[k] for k in ("format", "version", "step", "optimizer_steps")} == {
    "format": "pipecoord-rank-checkpoint", "version": "1", "step": "3", "optimizer_steps": "4"}, meta
fresh = runner()
assert resume(fresh, d, "job-1", 3, 3) == 4
got = [step(fresh, n) for n in (4, 5)]
assert got == losses[4:], (got, losses)
print(f"resumed after step 3: losses {got} equal the uninterrupted run's")

def refused(want, *args, last_layers=2):
    try:
        resume(runner(last_layers), d, "job-1", *args)
    except (OSError, ValueError) as e:
        assert str(e) == want, (str(e), want)
        return
    raise SystemExit(f"accepted: {args}")

path = checkpoint_path(d, "job-1", 3, 5)
refused(f'{path}: tensor "stage1/layers.3.attention_norm.weight/value": not in this rank\'s stages (the module '
        "differs from the one that wrote the checkpoint)", 3, 5, last_layers=1)
missing = checkpoint_path(d, "job-1", 3, 7)
refused(f"no checkpoint {missing} (--checkpoint-dir must be the folder the job's workers wrote, shared by every "
        "worker)", 3, 7)
os.rename(path, missing)
refused(f"{missing}: holds step 5, expected 7", 3, 7)
raw = bytearray(open(missing, "rb").read())
raw[-1] ^= 1
open(missing, "wb").write(raw)
refused(f"{missing}: checksum mismatch: the file is corrupt", 3, 7)
PY

# --- 0b. Tensor parallelism, two processes (the tp group): each rank saves its DTensors' local
#         shards after step 3; fresh tp stages resumed from them train steps 4..5 to the
#         uninterrupted run's losses and weights bit for bit (fresh stages not resumed do not) ---
"$PYTHON" - "$WORK/unit-tp" <<'PY' || fail "tensor-parallel save and resume"
import os, sys
sys.path.insert(0, "python/examples")
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def run(r, d, port, out):
    from reference_stages import build_stage
    from pipecoord.safetensors_io import read_safetensors
    from pipecoord.stage_api import ModelSpec, StageShard
    from pipecoord.synthetic_data import SyntheticData
    from pipecoord.torch_checkpoint import CheckpointWriter, checkpoint_path, resume
    from pipecoord.torch_stages import StageRunner
    from proto import job_pb2
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    group = dist.new_group([0, 1])
    model = ModelSpec(layers=4, hidden=32, heads=4, vocab=64, seq_len=8, seed=3)
    shards = {0: StageShard(0, 0, 2, True, False, r, 2, group), 1: StageShard(1, 2, 2, False, True, r, 2, group)}
    data = SyntheticData(3, 64, 8, 2)

    def runner():
        spec = job_pb2.JobSpec(learning_rate=0.01, steps=100)
        return StageRunner({k: build_stage(s, model) for k, s in shards.items()}, shards, 2, spec, "cpu")

    def step(run, n):
        for mb in range(2):
            x, y = data.batch(n, mb)
            run.forward(1, mb, run.forward(0, mb, x), y)
            run.backward_full(0, mb, run.backward_full(1, mb, torch.tensor(1.0)))
        run.optimizer_step()
        return run.step_loss()

    def weights(run):
        return {k: v.detach().to_local().clone() if hasattr(v, "to_local") else v.detach().clone()
                for s in sorted(run.modules) for k, v in run.modules[s].state_dict(keep_vars=True).items()}

    first, w = runner(), CheckpointWriter(d, "job-tp", r)
    losses = [step(first, n) for n in range(4)]
    w.save(first, 3)
    losses += [step(first, n) for n in (4, 5)]
    stored = read_safetensors(checkpoint_path(d, "job-tp", r, 3))
    wq = stored["stage0/layers.0.attention.wq.weight/value"]
    assert list(wq.shape) == [16, 32], wq.shape  # this rank's heads' rows
    fresh = runner()
    assert resume(fresh, d, "job-tp", r, 3) == 4
    got = [step(fresh, n) for n in (4, 5)]
    assert got == losses[4:], (r, got, losses)
    want, have = weights(first), weights(fresh)
    assert all(torch.equal(want[k], have[k]) for k in want), [k for k in want if not torch.equal(want[k], have[k])]
    unresumed = runner()
    other = [step(unresumed, n) for n in (4, 5)]
    assert other != losses[4:], "a fresh stage must train otherwise, or the comparison proves nothing"
    if r == 0:
        open(out, "w").write(f"tp rank 0 resumed after step 3: losses {got} equal the uninterrupted run's\n")
    dist.destroy_process_group()

if __name__ == "__main__":
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = sys.argv[1] + ".txt"
    mp.start_processes(run, args=(sys.argv[1], port, out), nprocs=2, start_method="fork")
    print(open(out).read().strip())
PY

# --- 0c. ZeRO-1, two processes (dp 2): each rank saves the moments of the parameters its
#         ZeroRedundancyOptimizer steps; resumed at dp 2 the run goes on bit for bit; resumed at
#         dp 1 from both files (the restart of a shrunk job) it trains on to the dp 2 run's loss
#         (within 1e-6; zeroed moments would miss it) ---
"$PYTHON" - "$WORK/unit-zero" <<'PY' || fail "ZeRO-1 save and resume"
import os, sys
sys.path.insert(0, "python/examples")
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from reference_stages import build_stage
from pipecoord.safetensors_io import read_safetensors
from pipecoord.stage_api import ModelSpec, StageShard
from pipecoord.synthetic_data import SyntheticData
from pipecoord.torch_checkpoint import CheckpointWriter, checkpoint_path, resume
from pipecoord.torch_executor import all_reduce_mean
from pipecoord.torch_stages import StageRunner
from proto import job_pb2

model = ModelSpec(layers=4, hidden=32, heads=4, vocab=64, seq_len=8, seed=3)
shards = {0: StageShard(0, 0, 2, True, False), 1: StageShard(1, 2, 2, False, True)}
data = SyntheticData(3, 64, 8, 2)

def runner(m, zero, group=None):
    spec = job_pb2.JobSpec(learning_rate=0.01, steps=100, zero=1 if zero else 0)
    return StageRunner({k: build_stage(s, model) for k, s in shards.items()}, shards, m, spec, "cpu", group)

def step(run, n, mbs, group=None):  # the micro-batches mbs of step n, the replicas' mean gradient
    for i, mb in enumerate(mbs):
        x, y = data.batch(n, mb)
        run.forward(1, i, run.forward(0, i, x), y)
        run.backward_full(0, i, run.backward_full(1, i, torch.tensor(1.0)))
    if group is not None:
        all_reduce_mean(run.all_gradients(), group, 2)
    run.optimizer_step()
    loss = torch.tensor([run.step_loss()], dtype=torch.float64)
    if group is not None:
        dist.all_reduce(loss, group=group)
        loss /= 2
    return float(loss[0])

def replica(r, d, port, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=r, world_size=2)
    group = dist.new_group([0, 1])
    mbs = [2 * r, 2 * r + 1]
    first, w = runner(2, True, group), CheckpointWriter(d, "job-z", r)
    losses = [step(first, n, mbs, group) for n in range(4)]
    w.save(first, 3)
    losses += [step(first, n, mbs, group) for n in (4, 5)]
    stored = read_safetensors(checkpoint_path(d, "job-z", r, 3))
    moments = sorted(k for k in stored if k.endswith("/adam_m"))
    values = sorted(k for k in stored if k.endswith("/value"))
    assert 0 < len(moments) < len(values), (len(moments), len(values))  # its share of the moments only
    fresh = runner(2, True, group)
    assert resume(fresh, d, "job-z", r, 3) == 4
    got = [step(fresh, n, mbs, group) for n in (4, 5)]
    assert got == losses[4:], (r, got, losses)
    if r == 0:
        open(out, "w").write(repr((losses, len(moments), len(values))))
    dist.destroy_process_group()

if __name__ == "__main__":
    import socket
    d = sys.argv[1]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    out = d + ".txt"
    mp.start_processes(replica, args=(d, port, out), nprocs=2, start_method="fork")
    losses, held, total = eval(open(out).read())
    torch.set_num_threads(1)
    # dp 1 from both replicas' files: every moment from the file that holds it.
    one = runner(4, False)
    assert resume(one, d, "job-z", 0, 3, sources=[0, 1]) == 4
    got = [step(one, n, [0, 1, 2, 3]) for n in (4, 5)]
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, losses[4:]))
    assert worst <= 1e-6, (got, losses[4:])
    # The control: the same values with zeroed moments miss step 5's loss.
    blank = runner(4, False)
    resume(blank, d, "job-z", 0, 3, sources=[0, 1])
    for s_ in blank.optimizer.state.values():
        s_["exp_avg"].zero_()
        s_["exp_avg_sq"].zero_()
    missed = [step(blank, n, [0, 1, 2, 3]) for n in (4, 5)]
    assert abs(missed[1] - losses[5]) / abs(losses[5]) > 100 * max(worst, 1e-9), (missed, losses[4:])
    print(f"ZeRO-1 dp 2: replica 0 holds {held} of {total} tensors' moments; resumed at dp 2 bit for bit; "
          f"at dp 1 from both files: losses {got} within {worst:.1e} of dp 2's {losses[4:]} (zeroed moments: "
          f"{missed[1]:.6f})")
PY

# --- 1. Killed and resumed under a coordinator ---
start_coordinator --lease-ms 2000
start_torch() {  # start_torch LOG [flags...]: one torch worker, waits for its registration
  local log=$1
  shift
  "$PYTHON" -m pipecoord.torch_worker --coordinator "$PIPECOORD_ADDR" --import-path python/examples "$@" \
    > "$log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 600); do grep -q "registered as" "$log" && return; sleep 0.05; done
  fail "the torch worker of $log did not register"
}
start_torch "$WORK/torch-1.log" --checkpoint-dir "$CKPT"
start_torch "$WORK/victim.log" --checkpoint-dir "$CKPT"
victim=${PIDS[-1]}
torch_job() {
  local out=$1
  shift
  job_json "$out" pp=2 microbatches=4 steps=60 learningRate=0.01 \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}' "$@"
}
torch_job "$WORK/reference.json"
reference=$("$PIPECTL" submit "$WORK/reference.json" --format json | json_field '["jobId"]')
timeout 300 "$PIPECTL" watch "$reference" > /dev/null || fail "the reference run failed"

torch_job "$WORK/job.json" checkpointEvery=2 maxRestarts=1
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
for _ in $(seq 1200); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '.get("checkpointedSteps", 0)')" -ge 6 ] && break
  sleep 0.05
done
kill -KILL "$victim"
done_at_kill=$("$PIPECTL" status "$job" --format json | json_field '.get("stepsDone", 0)')
[ "$done_at_kill" -lt 60 ] || fail "the job finished before the kill; make it longer"
start_torch "$WORK/replacement.log" --checkpoint-dir "$CKPT"
timeout 300 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "the restarted job did not succeed: $(tail -5 "$WORK/watch.out")"
grep -q "resumed from the checkpoint of step" "$WORK/replacement.log" ||
  fail "the replacement did not resume from a checkpoint"

"$PIPECTL" status "$reference" --format json > "$WORK/reference.status.json"
"$PIPECTL" status "$job" --format json > "$WORK/job.status.json"
"$PYTHON" - "$WORK/reference.status.json" "$WORK/job.status.json" "$CKPT/$job" <<'PY' || fail "restart checks"
import json, os, sys
from pipecoord.safetensors_io import read_metadata, read_safetensors
from pipecoord.torch_checkpoint import fnv1a64
ref, job, ckpt = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
assert job["restarts"] == 1, job.get("restarts")
start = job["startStep"]
assert start >= 6 and start % 2 == 0, start
events = [e["message"] for e in job["events"]
          if e["message"].startswith("restarting (1 of 1) from step %d (its checkpoint): " % start)]
assert len(events) == 1, [e["message"] for e in job["events"]]
assert [s.get("step", 0) for s in job["steps"]] == list(range(60)), "each step once"
assert job.get("checkpointedSteps") == 60, job.get("checkpointedSteps")
want, got = [s["loss"] for s in ref["steps"]], [s["loss"] for s in job["steps"]]
assert got == want, next((i, a, b) for i, (a, b) in enumerate(zip(got, want)) if a != b)
# The C++ workers' files: the last step's on both ranks, intact, the stage's parameters and moments.
for g, stage in ((0, 0), (1, 1)):
    path = os.path.join(ckpt, f"rank-{g}", "step-59.safetensors")
    meta = read_metadata(path)
    assert (meta["format"], meta["version"], meta["step"], meta["optimizer_steps"]) == (
        "pipecoord-rank-checkpoint", "1", "59", "60"), meta
    raw = open(path, "rb").read()
    assert meta["fnv1a64"] == "%016x" % fnv1a64(raw[8 + int.from_bytes(raw[:8], "little"):]), path
    names = set(read_safetensors(path))
    assert all(n.startswith(f"stage{stage}/") for n in names), sorted(names)[:3]
    assert {f"stage{stage}/layers.{stage * 2}.attention.wq.weight/{k}" for k in ("value", "adam_m", "adam_v")} <= names
print(f"restarted from step {start} after the kill at {job.get('stepsDone')} steps done; 60 losses equal the "
      "uninterrupted run's")
PY
grep -q "^restarts  1 of 1 (this attempt from step " <<< "$("$PIPECTL" status "$job")" || fail "pipectl status does not show the restart"
# The reference model's names are the C++ model's: pipectl export reads the torch checkpoints.
"$PIPECTL" export "$job" --out "$WORK/export" --checkpoint-dir "$CKPT" > "$WORK/export.out" 2> "$WORK/export.err" ||
  fail "pipectl export of the torch job failed: $(cat "$WORK/export.err")"
[ -s "$WORK/export/model.safetensors" ] && [ -s "$WORK/export/config.json" ] || fail "pipectl export wrote no model"
echo "export: $(head -1 "$WORK/export.out")"
for p in "${PIDS[@]:1}"; do kill "$p" 2>/dev/null || true; done

# --- 2. checkpointEvery on workers without --checkpoint-dir ---
start_coordinator
start_torch "$WORK/plain-1.log"
start_torch "$WORK/plain-2.log"
torch_job "$WORK/nodir.json" checkpointEvery=2
job=$("$PIPECTL" submit "$WORK/nodir.json" --format json | json_field '["jobId"]')
for _ in $(seq 600); do
  [ "$("$PIPECTL" status "$job" --format json | json_field '["state"]')" = FAILED ] && break
  sleep 0.05
done
cause=$("$PIPECTL" status "$job" --format json | json_field '.get("failureCause", "")')
[[ "$cause" == *"spec.checkpointEvery: the job saves checkpoints but this worker has no --checkpoint-dir"* ]] ||
  fail "no --checkpoint-dir: the cause does not name it: $cause"
echo "no --checkpoint-dir: $cause"
for p in "${PIDS[@]:1}"; do kill "$p" 2>/dev/null || true; done

# --- 3. SIGTERM to a torch worker (a node drain): every rank stops after the same step and
#        checkpoints it; the job resumes there on a spare with no restart used ---
start_coordinator
start_torch "$WORK/drain-1.log" --checkpoint-dir "$CKPT"
start_torch "$WORK/drain-2.log" --checkpoint-dir "$CKPT"
start_torch "$WORK/drain-3.log" --checkpoint-dir "$CKPT"
torch_job "$WORK/drain.json" steps=60 checkpointEvery=5 maxRestarts=0
job=$("$PIPECTL" submit "$WORK/drain.json" --format json | json_field '["jobId"]')
wait_steps "$job" 7
victim=$("$PIPECTL" workers --format json | "$PYTHON" -c '
import json, sys
print([w for w in json.load(sys.stdin)["workers"] if w.get("jobId") and w.get("rank", 0) == 1][0]["workerId"])')
worker_process "$victim"
victim_pid=$WORKER_PID victim_log=$WORKER_LOG
kill -TERM "$victim_pid"
timeout 300 "$PIPECTL" watch "$job" > /dev/null || fail "the drained torch job did not succeed"
grep -q "shutting down: every rank of $job stops after step " "$victim_log" || fail "no coordinated stop: $(tail -3 "$victim_log")"
"$PIPECTL" status "$job" --format json > "$WORK/drain.status.json"
"$PYTHON" - "$WORK/drain.status.json" <<'PY' || fail "torch drain checks"
import json, re, sys
job = json.load(open(sys.argv[1]))
assert job["state"] == "SUCCEEDED" and job.get("restarts", 0) == 0, (job["state"], job.get("restarts"))
events = [e["message"] for e in job["events"]]
n = int(re.search(r"every rank stops after step (\d+)", next(m for m in events if "every rank stops after step" in m)).group(1))
assert any(m.startswith("drained for worker ") and m.endswith("resuming from step %d (their checkpoint)" % (n + 1)) for m in events), events
assert [s.get("step", 0) for s in job["steps"]] == list(range(60)), "each step once"
print("torch drain: every rank stopped after step %d, resumed from %d, no restart" % (n, n + 1))
PY
for p in "${PIDS[@]:1}"; do kill "$p" 2>/dev/null || true; done

# --- 4. pipectl export of a module with names of its own (docs/pytorch.md's tiny_lm) lists what
#        it cannot map, with the files ---
mkdir -p "$WORK/tiny"
"$PYTHON" - docs/pytorch.md "$WORK/tiny" <<'PY' || fail "docs/pytorch.md: example blocks not found"
import json, os, re, sys
text, out = open(sys.argv[1]).read(), sys.argv[2]
for name in ("tiny_lm.py", "job.json"):
    m = re.search(r"<!-- example: " + re.escape(name) + r" -->\n```\w+\n(.*?)```", text, re.S)
    open(os.path.join(out, name), "w").write(m.group(1))
spec = json.load(open(os.path.join(out, "job.json")))
spec.update(steps=2, checkpointEvery=1)
json.dump(spec, open(os.path.join(out, "job.json"), "w"))
PY
start_coordinator
start_torch "$WORK/tiny-1.log" --checkpoint-dir "$CKPT" --import-path "$WORK/tiny"
start_torch "$WORK/tiny-2.log" --checkpoint-dir "$CKPT" --import-path "$WORK/tiny"
job=$("$PIPECTL" submit "$WORK/tiny/job.json" --format json | json_field '["jobId"]')
timeout 120 "$PIPECTL" watch "$job" > /dev/null || fail "the tiny_lm job failed"
rc=0
"$PIPECTL" export "$job" --out "$WORK/tiny-export" --checkpoint-dir "$CKPT" > /dev/null 2> "$WORK/tiny-export.err" || rc=$?
[ "$rc" != 0 ] || fail "pipectl export of a module with its own names succeeded"
grep -qE "tensor\(s\) are not the built-in Llama model's, whose names pipectl export maps to Hugging Face's: [^ ]+ \($CKPT/$job/rank-[01]/step-1.safetensors\)" \
  "$WORK/tiny-export.err" || fail "export of tiny_lm: $(cat "$WORK/tiny-export.err")"
echo "export of a module with its own names: $(head -c 300 "$WORK/tiny-export.err")"
echo "e2e torch checkpoints: ok"
