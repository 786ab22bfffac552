#!/usr/bin/env bash
# PyTorch workers read spec.data exactly as the C++ workers do: python/pipecoord/token_data.py
# against the C++ data code, whose answers sampler_dump prints (never numbers typed in here):
# 1. the sampler's windows over token ranges: several seeds (one above 2^63), sequence lengths,
#    batch shapes and dp, every step of three epochs where the windows do not divide into steps
#    (the leftover windows rotate: checked to differ between epochs), a range of 10^12 tokens
#    (windows past 2^32), a very late step, the sequential (validation) order, one exact epoch;
# 2. a dataset written by pipectl data prepare from a small text: the windows and token values of
#    every micro-batch of 12 steps, dp 2, as a prepared folder and as PREFIX with valFraction 0.1;
#    and of Megatron-LM's .bin/.idx (uint16, int32) and a flat uint32 file, across epochs; the
#    validation batches (sequential, per replica) of the folder's val, a valFraction tail, a valPath;
# 3. that it can fail: a sampler with another seed, and a token changed in the .bin, are refused.
set -euo pipefail
source tests/python.sh  # PYTHON
dump=tests/torch_data/sampler_dump
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compare() { "$PYTHON" tests/torch_data/compare.py "$@"; }

range() {  # range NAME sampler_dump-range-flags...
  local name=$1
  shift
  $dump range "$@" > "$work/$name.json"
  compare range "$work/$name.json" "$@"
}
echo "== sampler windows"
all12=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14
range epochs --begin 3 --end 1000 --seed 18446744073709551557 --seq 16 --batch 2 --microbatches 3 --dp 2 --steps $all12
range tiny --end 6 --seed 0 --seq 1 --batch 1 --microbatches 1 --dp 1 --steps $all12
range odd --begin 17 --end 5000 --seed 42 --seq 7 --batch 3 --microbatches 5 --dp 3 --steps 0,1,7,14,15,16,29,30,31
range exact --end 17 --seed 9 --seq 1 --batch 2 --microbatches 2 --dp 4 --steps 0,1,2,3
range large --end 1000000000000 --seed 1234567 --seq 4096 --batch 4 --microbatches 8 --dp 4 \
  --steps 0,1,1000,1048576,1907347,1907348,3814697
range late --end 100000 --seed 5 --seq 64 --batch 2 --microbatches 4 --dp 2 --steps 123456789
range sequential --begin 100 --end 2000 --seed 5 --seq 8 --batch 2 --microbatches 3 --dp 2 --order sequential \
  --steps 0,1,5,13

# The "epochs" case exercises the rotation: 62 windows, 12 per step, 2 left over, and the two
# windows epoch 0 leaves out are not the ones epoch 1 leaves out.
"$PYTHON" - "$work/epochs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert (d["windows"], d["per_step"], d["steps_per_epoch"]) == (62, 12, 5), d
read = {}
for step, _, _, starts in d["starts"]:
    read.setdefault(step // 5, []).extend(starts)
every = {3 + 16 * w for w in range(62)}
left = [every - set(read[e]) for e in (0, 1, 2)]
assert all(len(r) == 60 and len(set(r)) == 60 for r in read.values()), "a window twice in one epoch"
assert all(len(l) == 2 for l in left) and left[0] != left[1], left
print(f"leftover windows by epoch: {[sorted(l) for l in left]}")
PY

echo "== a dataset from pipectl data prepare"
"$PYTHON" -c '
import sys
words = "tokens flow through the pipeline while every stage keeps its weights".split()
with open(sys.argv[1], "w") as f:
    for i in range(400):
        f.write(" ".join(words[(i * 5 + k) % len(words)] for k in range(5)) + ".\n")' "$work/text.txt"
cli/pipectl data prepare "$work/text.txt" --out "$work/data" > /dev/null
job() {  # job NAME sampler_dump-job-flags...
  local name=$1
  shift
  $dump job "$@" > "$work/$name.json"
  compare job "$work/$name.json" "$@"
}
job folder --data "$work/data" --vocab 256 --seed 11 --seq 16 --batch 2 --microbatches 3 --dp 2 --train-steps 12
job tail --data "$work/data/train" --vocab 300 --seed 3 --seq 9 --batch 3 --microbatches 2 --dp 2 \
  --val-fraction 0.1 --train-steps 12
# Validation batches (spec.evalEvery): the folder's val split, the valFraction tail, a valPath.
job folder_val --data "$work/data" --vocab 256 --seed 11 --seq 16 --batch 2 --microbatches 3 --dp 2 --train-steps 2 \
  --eval-batches 3
job tail_val --data "$work/data/train" --vocab 300 --seed 3 --seq 9 --batch 3 --microbatches 2 --dp 2 \
  --val-fraction 0.1 --train-steps 2 --eval-batches 5
job path_val --data "$work/data/train" --vocab 256 --seed 4 --seq 8 --batch 2 --microbatches 2 --train-steps 2 \
  --val-path "$work/data/val" --eval-batches 4

echo "== Megatron-LM and uint32 datasets (data/testdata/write_token_datasets.py)"
fmt=data/python_written
job megatron_u16 --data $fmt/megatron_u16 --vocab 1000 --seed 7 --seq 4 --batch 1 --microbatches 2 --train-steps 14
job megatron_i32 --data $fmt/megatron_i32 --vocab 70000 --seed 8 --seq 3 --batch 2 --microbatches 1 --dp 2 \
  --val-fraction 0.2 --train-steps 9
job flat_u32 --data $fmt/flat_u32.bin --vocab 100000 --seed 9 --seq 10 --batch 2 --microbatches 2 --train-steps 9

echo "== and it can fail"
if compare range "$work/odd.json" --begin 17 --end 5000 --seed 43 --seq 7 --batch 3 --microbatches 5 --dp 3 \
  > "$work/out" 2>&1; then
  echo "FAIL: another seed's windows accepted"; exit 1
fi
grep -q "python .*, C++" "$work/out" || { cat "$work/out"; exit 1; }
# One byte of the first window step 0 reads, changed in the .bin (the .json still agrees).
"$PYTHON" - "$work/folder.json" "$work/data/train.bin" <<'PY'
import json, sys
start = json.load(open(sys.argv[1]))["batches"][0][3][0]
with open(sys.argv[2], "r+b") as f:
    f.seek(2 * start)
    v = int.from_bytes(f.read(2), "little")
    f.seek(2 * start)
    f.write(((v + 1) % 256).to_bytes(2, "little"))
PY
if compare job "$work/folder.json" --data "$work/data" --vocab 256 --seed 11 --seq 16 --batch 2 --microbatches 3 \
  --dp 2 > "$work/out" 2>&1; then
  echo "FAIL: a changed token accepted"; exit 1
fi
grep -q "inputs differ" "$work/out" || { cat "$work/out"; exit 1; }
echo PASS
