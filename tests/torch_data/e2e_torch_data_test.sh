#!/usr/bin/env bash
# PyTorch workers train on spec.data exactly as the C++ workers read it, under a real coordinator
# (gloo on loopback): a byte-level dataset written by pipectl data prepare from a small text, so
# small that 6 steps cross two epochs (the sampler's new order and leftover windows); a pp 2 job
# on two torch workers and a pp 2 x dp 2 job on four give the step losses of a single-process
# PyTorch run of the same model on the windows the C++ data code (JobData, printed by
# sampler_dump) reads for each (step, replica, micro-batch): relative 1e-5 every step. With
# spec.evalEvery 4 over a valPath split (evalBatches 3 per replica), the validation losses the
# coordinator records after steps 3 and 5 (every 4th and the last) equal the single-process
# run's forward-only loss on JobData::Validation's batches, averaged over the replicas, within
# relative 1e-5 (pp 2 1f1b, pp 2 x dp 2 zbh1, and zbv, whose rank 1 hands stage 1 to stage 2
# locally), and only those steps have one.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"
DUMP=tests/torch_data/sampler_dump

start_coordinator
start_torch_workers 4

# 360 bytes of text: train.bin holds 324 tokens, 20 windows of 17 tokens; 8 sequences a step
# (dp 1) make 2 steps an epoch with 4 windows left over (dp 2: 16 a step, 1 step an epoch).
"$PYTHON" -c '
import sys
words = "stages pass activations forward and gradients back".split()
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(" ".join(words[(i * 3 + k) % len(words)] for k in range(6)) + ".\n")' "$WORK/text.txt"
"$PIPECTL" data prepare "$WORK/text.txt" --out "$WORK/data" > "$WORK/prepare.out" || fail "data prepare"
# The validation split (spec.data.valPath): another text's tokens, enough for dp 2 x 3 batches of 2.
"$PYTHON" -c '
import sys
words = "the coordinator plans every step and the workers report their losses".split()
with open(sys.argv[1], "w") as f:
    for i in range(12):
        f.write(" ".join(words[(i * 5 + k) % len(words)] for k in range(7)) + ".\n")' "$WORK/val.txt"
"$PIPECTL" data prepare "$WORK/val.txt" --out "$WORK/valdata" > "$WORK/prepare-val.out" || fail "data prepare (val)"

data_job() {  # data_job FILE overrides...
  local out=$1
  shift
  job_json "$out" microbatches=4 microBatchSize=2 steps=6 learningRate=0.01 'dataSeed="5"' \
    'model={"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "seqLen": 16, "seed": "11"}' \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}' evalEvery=4 evalBatches=3 \
    "data={\"path\": \"$WORK/data\", \"valPath\": \"$WORK/valdata/train\"}" "$@"
}

# A single-process run of the whole model on the C++ sampler's windows: each step every replica's
# micro-batches, (loss / (m dp)) backward (the replicas' averaged gradients), AdamW; after steps 3
# and 5 the validation loss: each replica's mean over its 3 batches, forward only, then the mean
# over the replicas (the coordinator's). Prints {"loss": [...], "val": {step: loss}}.
reference() {  # reference JOB_JSON OUT: also writes OUT.windows (sampler_dump's answer)
  local dp
  dp=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("dp", 1))' "$1")
  $DUMP job --data "$WORK/data" --vocab 256 --seed 5 --seq 16 --batch 2 --microbatches 4 --dp "$dp" \
    --train-steps 6 --val-path "$WORK/valdata/train" --eval-batches 3 > "$2.windows" || fail "sampler_dump"
  "$PYTHON" - "$1" "$2.windows" > "$2" <<'PY' || fail "the single-process run failed"
import json, sys
import torch
import torch.nn.functional as F
sys.path.insert(0, "python/examples")
from reference_stages import build_stage
from pipecoord.stage_api import ModelSpec, StageShard
torch.set_num_threads(1)
spec, dump = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
m, b, dp, ms = spec["microbatches"], spec["microBatchSize"], spec.get("dp", 1), spec["model"]
assert (dump["per_step"], dump["steps_per_epoch"]) == (dp * m * b, 2 // dp), dump  # 6 steps cross epochs
model = build_stage(StageShard(0, 0, ms["layers"], True, True),
                    ModelSpec(layers=ms["layers"], hidden=ms["hidden"], heads=ms["heads"], vocab=ms["vocab"],
                              seq_len=ms["seqLen"], seed=int(ms["seed"])))
opt = torch.optim.AdamW(model.parameters(), lr=spec["learningRate"], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
batches = {(s, r, mb): (x, y) for s, r, mb, _, x, y in dump["batches"]}
val_batches = {(r, k): (x, y) for r, k, x, y in dump["validation"]}
assert sorted(val_batches) == [(r, k) for r in range(dp) for k in range(3)], sorted(val_batches)


def loss_of(x, y):
    tokens = torch.tensor(x, dtype=torch.int64).view(b, ms["seqLen"])
    targets = torch.tensor(y, dtype=torch.int64).view(b, ms["seqLen"])
    logits = model(tokens)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


losses, val = [], {}
for step in range(spec["steps"]):
    total = 0.0
    for replica in range(dp):
        for mb in range(m):
            loss = loss_of(*batches[(step, replica, mb)])
            (loss / (m * dp)).backward()
            total += loss.item()
    opt.step()
    opt.zero_grad()
    losses.append(total / (m * dp))
    if (step + 1) % spec["evalEvery"] == 0 or step + 1 == spec["steps"]:
        with torch.no_grad():
            per_replica = [sum(float(loss_of(*val_batches[(r, k)])) for k in range(3)) / 3 for r in range(dp)]
        val[step] = sum(per_replica) / dp
print(json.dumps({"loss": losses, "val": val}))
PY
}

for case in "1f1b 1" "zbh1 2" "zbv 1"; do
  set -- $case
  data_job "$WORK/job-$1.json" pp=2 dp="$2" "schedule=\"$1\""
  reference "$WORK/job-$1.json" "$WORK/ref-$1.json"
  job=$("$PIPECTL" submit "$WORK/job-$1.json" --format json | json_field '["jobId"]')
  timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "$case: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  "$PYTHON" - "$WORK/status.json" "$WORK/ref-$1.json" "pp 2 dp $2 $1" <<'PY' || fail "$case: losses differ"
import json, sys
job, ref, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
ref_val = {int(k): v for k, v in ref["val"].items()}
ref = ref["loss"]
got = [s["loss"] for s in job["steps"]]
assert len(got) == len(ref), (got, ref)
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
print(f"{name} on spec.data: losses {' '.join('%.6f' % g for g in got)}, worst relative difference {worst:.2e}")
assert worst <= 1e-5, (got, ref)
assert ref[-1] < ref[0], ref  # it learns the text
got_val = {s.get("step", 0): s["valLoss"] for s in job["steps"] if s.get("hasValLoss")}
assert sorted(got_val) == sorted(ref_val) == [3, 5], (got_val, ref_val)
worst = max(abs(got_val[k] - ref_val[k]) / abs(ref_val[k]) for k in ref_val)
print(f"{name} validation: {' '.join('step %d %.6f' % (k, got_val[k]) for k in sorted(got_val))}, "
      f"worst relative difference {worst:.2e}")
assert worst <= 1e-5, (got_val, ref_val)
PY
done
echo PASS
