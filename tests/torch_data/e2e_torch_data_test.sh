#!/usr/bin/env bash
# PyTorch workers train on spec.data exactly as the C++ workers read it, under a real coordinator
# (gloo on loopback): a byte-level dataset written by pipectl data prepare from a small text, so
# small that 6 steps cross two epochs (the sampler's new order and leftover windows); a pp 2 job
# on two torch workers and a pp 2 x dp 2 job on four give the step losses of a single-process
# PyTorch run of the same model on the windows the C++ data code (JobData, printed by
# sampler_dump) reads for each (step, replica, micro-batch): relative 1e-5 every step. And
# spec.evalEvery on a torch job is refused at submit naming the field.
source tests/lib.sh
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:$PWD/python"
DUMP=tests/torch_data/sampler_dump

start_torch_workers() {  # N: waits until N are registered
  local n=$1
  for i in $(seq "$n"); do
    /usr/bin/python3 -m pipecoord.torch_worker --coordinator "$PIPECOORD_ADDR" --import-path python/examples \
      > "$WORK/torch-$i.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 600); do
    [ "$("$PIPECTL" workers --format json | /usr/bin/python3 -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin).get("workers", []) if w.get("workerKind") == "torch"))')" -ge "$n" ] && return
    sleep 0.05
  done
  fail "torch workers did not register"
}
start_coordinator
start_torch_workers 4

# 360 bytes of text: train.bin holds 324 tokens, 20 windows of 17 tokens; 8 sequences a step
# (dp 1) make 2 steps an epoch with 4 windows left over (dp 2: 16 a step, 1 step an epoch).
/usr/bin/python3 -c '
import sys
words = "stages pass activations forward and gradients back".split()
with open(sys.argv[1], "w") as f:
    for i in range(8):
        f.write(" ".join(words[(i * 3 + k) % len(words)] for k in range(6)) + ".\n")' "$WORK/text.txt"
"$PIPECTL" data prepare "$WORK/text.txt" --out "$WORK/data" > "$WORK/prepare.out" || fail "data prepare"

data_job() {  # data_job FILE overrides...
  local out=$1
  shift
  job_json "$out" microbatches=4 microBatchSize=2 steps=6 learningRate=0.01 'dataSeed="5"' \
    'model={"layers": 4, "hidden": 32, "heads": 4, "vocab": 256, "seqLen": 16, "seed": "11"}' \
    'worker={"kind": "torch", "module": "reference_stages:build_stage"}' "data={\"path\": \"$WORK/data\"}" "$@"
}

# A single-process run of the whole model on the C++ sampler's windows: each step every replica's
# micro-batches, (loss / (m dp)) backward (the replicas' averaged gradients), AdamW.
reference() {  # reference JOB_JSON OUT: also writes OUT.windows (sampler_dump's answer)
  local dp
  dp=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("dp", 1))' "$1")
  $DUMP job --data "$WORK/data" --vocab 256 --seed 5 --seq 16 --batch 2 --microbatches 4 --dp "$dp" \
    --train-steps 6 > "$2.windows" || fail "sampler_dump"
  /usr/bin/python3 - "$1" "$2.windows" > "$2" <<'PY' || fail "the single-process run failed"
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
losses = []
for step in range(spec["steps"]):
    total = 0.0
    for replica in range(dp):
        for mb in range(m):
            x, y = batches[(step, replica, mb)]
            tokens = torch.tensor(x, dtype=torch.int64).view(b, ms["seqLen"])
            targets = torch.tensor(y, dtype=torch.int64).view(b, ms["seqLen"])
            logits = model(tokens)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            (loss / (m * dp)).backward()
            total += loss.item()
    opt.step()
    opt.zero_grad()
    losses.append(total / (m * dp))
print(json.dumps(losses))
PY
}

# Validation is not run on torch workers: refused at submit, naming the field.
data_job "$WORK/eval.json" pp=2 evalEvery=2 evalBatches=1
rc=0
"$PIPECTL" submit "$WORK/eval.json" > "$WORK/out" 2> "$WORK/err" || rc=$?
[ "$rc" = 2 ] || fail "evalEvery on torch workers: exit $rc, want 2: $(cat "$WORK/err")"
grep -qF "spec.evalEvery: torch workers do not run validation (not implemented" "$WORK/err" ||
  fail "evalEvery refusal: $(cat "$WORK/err")"

for case in "1f1b 1" "zbh1 2"; do
  set -- $case
  data_job "$WORK/job-$1.json" pp=2 dp="$2" "schedule=\"$1\""
  reference "$WORK/job-$1.json" "$WORK/ref-$1.json"
  job=$("$PIPECTL" submit "$WORK/job-$1.json" --format json | json_field '["jobId"]')
  timeout 120 "$PIPECTL" watch "$job" > "$WORK/watch.out" || fail "$case: $(tail -3 "$WORK/watch.out")"
  "$PIPECTL" status "$job" --format json > "$WORK/status.json"
  /usr/bin/python3 - "$WORK/status.json" "$WORK/ref-$1.json" "pp 2 dp $2 $1" <<'PY' || fail "$case: losses differ"
import json, sys
job, ref, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert job["state"] == "SUCCEEDED", job.get("failureCause")
got = [s["loss"] for s in job["steps"]]
assert len(got) == len(ref), (got, ref)
worst = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
print(f"{name} on spec.data: losses {' '.join('%.6f' % g for g in got)}, worst relative difference {worst:.2e}")
assert worst <= 1e-5, (got, ref)
assert ref[-1] < ref[0], ref  # it learns the text
PY
done
echo PASS
