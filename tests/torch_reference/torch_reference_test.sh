#!/usr/bin/env bash
# Our C++ model against PyTorch (python/pipecoord/reference_model.py, Debian's python3-torch):
# 1. one micro-batch: logits, loss and every parameter's gradient within 1e-5 (relative to each
#    tensor's largest element), with PyTorch in float64 and in float32, at two shapes; then three
#    AdamW steps with weight decay: the weights against PyTorch in float64 (compare.py says which
#    elements AdamW's conditioning leaves out, and why);
# 2. a pipelined job of every schedule family (worker/daemon/local_run: one thread and executor
#    per rank, TCP on loopback), 3 AdamW steps: step losses, weights and AdamW moments against
#    PyTorch running the same steps in one process;
# 3. spec.optimizer (betas, eps, weight decay, warmup + cosine or linear decay, clipping by the
#    global norm) through tp (with and without sequence parallelism) x pp x dp, ZeRO-1 and
#    activation recompute, against PyTorch's AdamW, LinearLR /
#    CosineAnnealingLR / SequentialLR and clip_grad_norm_ on one process;
# 4. and that it can fail: a gradient off by 1e-4 in one element, PyTorch's RoPE with another
#    base, and PyTorch clipping at another threshold are all refused.
set -euo pipefail
source tests/python.sh  # PYTHON
dump=tests/torch_reference/model_dump
gen=$(dirname "$(dirname "$(readlink -f proto/job_pb2.py)")")
export PYTHONPATH="$gen:python"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compare() { "$PYTHON" tests/torch_reference/compare.py "$@"; }

echo "== one micro-batch"
$dump microbatch --out "$work/mb_small.st"
$dump microbatch --layers 3 --hidden 64 --heads 4 --vocab 96 --seq 32 --batch 2 --seed 3 --out "$work/mb_wide.st"
# Grouped-query attention: 8 query heads over 2 key/value heads (PyTorch repeats them, repeat_kv).
$dump microbatch --layers 2 --hidden 64 --heads 8 --kv-heads 2 --vocab 96 --seq 16 --batch 2 --seed 4 --out "$work/mb_gqa.st"
# Qwen2's q, k, v biases: one micro-batch's logits, loss and gradients. (Not its AdamW steps here:
# attention is nearly blind to a key bias, only RoPE's rotation lets it count, so k's bias has tiny
# gradients and AdamW's normalized step turns their fp32 rounding into 1.7e-5 of the bias after two
# steps; the pipelined job below steps biases 5 times within tolerance.)
$dump microbatch --layers 2 --hidden 32 --heads 4 --kv-heads 2 --qkv-bias --vocab 64 --seq 16 --batch 2 --seed 5 \
  --out "$work/mb_qkv_bias.st"
# Mistral's sliding window: 5 of the 16 tokens (the reference masks the keys it left behind).
$dump microbatch --layers 2 --hidden 32 --heads 4 --kv-heads 2 --sliding-window 5 --vocab 64 --seq 16 --batch 2 --seed 6 \
  --out "$work/mb_window.st"
compare --dtype float64 "$work/mb_small.st" "$work/mb_wide.st" "$work/mb_gqa.st" "$work/mb_window.st"
compare --dtype float64 --no-steps "$work/mb_qkv_bias.st"
compare --dtype float32 --no-steps "$work/mb_small.st" "$work/mb_wide.st" "$work/mb_gqa.st" "$work/mb_qkv_bias.st"

echo "== what the reference model does not run is refused by its field"
"$PYTHON" - <<'EOF'
from types import SimpleNamespace as Spec
from pipecoord.reference_model import ModelShape
base = dict(layers=1, hidden=32, heads=4, vocab=64, seq_len=8)
assert ModelShape.from_spec(Spec(**base, head_dim=8)).hidden == 32  # hidden / heads: the default
for extra, field in ((dict(head_dim=16), "model.headDim"), (dict(tied_embeddings=True), "model.tiedEmbeddings")):
    try:
        ModelShape.from_spec(Spec(**base, **extra))
    except ValueError as e:
        assert str(e).startswith(field + ": "), e
        print("refused:", e)
    else:
        raise SystemExit(f"FAIL: {extra} ran as something else")
EOF

echo "== pipelined, every schedule family"
# lr 1e-3: AdamW moves an ill-conditioned element (compare.py) by lr x (gradient difference) /
# sqrt(v), and the weights it moved change every later step's gradients a little; at lr 1e-2 that
# alone reaches 2.6e-5 in the AdamW moments of 8-layer jobs after 3 steps (the errors scale with
# lr: 1e-2 2.6e-5, 3e-3 6.7e-6, 1e-3 2.3e-6 on dualpipev).
run() {  # name, then model_dump flags
  local name=$1
  shift
  $dump pipelined --out "$work/pl_$name.st" --hidden 16 --heads 2 --vocab 32 --seq 8 --batch 2 --seed 11 \
    --lr 0.001 "$@"
  pipelined+=("$work/pl_$name.st")
}
pipelined=()
run fthenb --schedule fthenb --pp 2 --microbatches 4 --layers 4
run 1f1b --schedule 1f1b --pp 3 --microbatches 5 --layers 6 --stage-layers 1,3,2
run eager-1f1b --schedule eager-1f1b --pp 2 --microbatches 4 --layers 4
run interleaved --schedule interleaved --pp 2 --vpp 2 --microbatches 5 --layers 7
run looped-bfs --schedule looped-bfs --pp 2 --vpp 2 --microbatches 3 --layers 4
run zbh1 --schedule zbh1 --pp 3 --microbatches 6 --layers 6
run zbh2 --schedule zbh2 --pp 3 --microbatches 6 --layers 6
run zb-auto --schedule zb-auto --pp 3 --microbatches 6 --layers 6
run zbv --schedule zbv --pp 2 --vpp 2 --microbatches 4 --layers 8
run v-half --schedule v-half --pp 2 --vpp 2 --microbatches 4 --layers 4
run v-min --schedule v-min --pp 3 --vpp 2 --microbatches 6 --layers 6
run dualpipev --schedule dualpipev --pp 2 --vpp 2 --microbatches 4 --layers 8
compare --dtype float64 "${pipelined[@]}"

echo "== spec.optimizer: PyTorch's AdamW (betas, eps, weight decay), schedulers and clip_grad_norm_"
# Through tp x pp x dp with and without ZeRO-1: each step's loss, global gradient norm and learning
# rate, then the weights and moments (tp slices joined, ZeRO shards put together); every step clips
# (norms about 0.9 against 0.3).
opt=(--hidden 16 --heads 2 --vocab 32 --seq 8 --batch 2 --seed 11 --lr 0.001 --steps 5 --optimizer --beta1 0.85
     --beta2 0.98 --eps 1e-6 --weight-decay 0.1 --min-lr 0.0001 --clip 0.3)
$dump pipelined --out "$work/opt_zbh1.st" "${opt[@]}" --schedule zbh1 --pp 2 --tp 2 --dp 2 --zero 1 --microbatches 4 \
  --layers 4 --lr-schedule cosine --warmup 2
# Sequence parallelism with full recompute, and zbv with selective recompute.
$dump pipelined --out "$work/opt_sp.st" "${opt[@]}" --schedule 1f1b --pp 2 --tp 2 --sp --recompute full --dp 2 \
  --microbatches 4 --layers 4 --lr-schedule cosine --warmup 2
$dump pipelined --out "$work/opt_zbv.st" "${opt[@]}" --schedule zbv --pp 2 --vpp 2 --tp 2 --sp --recompute selective \
  --zero 1 --dp 2 --microbatches 4 --layers 8 --lr-schedule linear
$dump pipelined --out "$work/opt_interleaved.st" "${opt[@]}" --schedule interleaved --pp 2 --vpp 2 --tp 2 --dp 2 \
  --microbatches 4 --layers 7 --lr-schedule linear --decay-steps 3
$dump pipelined --out "$work/opt_dualpipev.st" "${opt[@]}" --schedule dualpipev --pp 2 --vpp 2 --dp 3 --zero 1 \
  --microbatches 4 --layers 8 --lr-schedule cosine
# Grouped-query attention with q, k, v biases and a sliding window (3 tokens) under tp 2 with
# sequence parallelism: each rank its 2 query heads, the key/value head they read and their biases' rows.
$dump pipelined --out "$work/opt_gqa.st" "${opt[@]}" --heads 4 --kv-heads 2 --qkv-bias --sliding-window 3 --schedule zbh1 --pp 2 --tp 2 --sp --dp 2 \
  --microbatches 4 --layers 4 --lr-schedule cosine
compare --dtype float64 "$work/opt_zbh1.st" "$work/opt_interleaved.st" "$work/opt_dualpipev.st" "$work/opt_sp.st" \
  "$work/opt_zbv.st" "$work/opt_gqa.st"

echo "== it can fail"
"$PYTHON" - "$work/mb_small.st" "$work/mb_bad.st" <<'PY'
import sys
from pipecoord.safetensors_io import read_metadata, read_safetensors, write_safetensors
t = read_safetensors(sys.argv[1])
g = t["grad/layers.0.attention.wq.weight"]
g.view(-1)[int(g.abs().argmax())] *= 1 + 1e-4
write_safetensors(sys.argv[2], t, read_metadata(sys.argv[1]))
PY
if compare "$work/mb_bad.st" > "$work/bad.out"; then
  cat "$work/bad.out"; echo "FAIL: a gradient off by 1e-4 passed"; exit 1
fi
grep -q "^FAIL gradients (one micro-batch) .*(layers.0.attention.wq.weight)" "$work/bad.out" \
  || { cat "$work/bad.out"; echo "FAIL: the wrong gradient is not the one named"; exit 1; }
if compare --rope-theta 500000 "$work/mb_small.st" > "$work/rope.out"; then
  cat "$work/rope.out"; echo "FAIL: PyTorch with another RoPE base passed"; exit 1
fi
grep -q "^FAIL logits" "$work/rope.out" || { cat "$work/rope.out"; echo "FAIL: logits not refused"; exit 1; }
# PyTorch clipping at another threshold than the job's: the weights part.
"$PYTHON" - "$work/opt_zbh1.st" "$work/opt_clip.st" <<'PY'
import sys
from pipecoord.safetensors_io import read_metadata, read_safetensors, write_safetensors
meta = read_metadata(sys.argv[1])
meta["clip_grad_norm"] = "0.6"
write_safetensors(sys.argv[2], read_safetensors(sys.argv[1]), meta)
PY
if compare "$work/opt_clip.st" > "$work/clip.out"; then
  cat "$work/clip.out"; echo "FAIL: another clipping threshold passed"; exit 1
fi
grep -q "^FAIL weights after 5 AdamW steps" "$work/clip.out" || { cat "$work/clip.out"; echo "FAIL: weights not refused"; exit 1; }
# Every tensor a module has, a 0-dimensional buffer included (register_buffer("scale",
# torch.tensor(0.5)) once failed with "self.dim() cannot be 0 to view Float as Byte"): written and
# read back by the torch checkpoints' safetensors code, shape and value kept.
"$PYTHON" - "$work/scalar.st" <<'PY' || { echo "FAIL: a 0-dimensional buffer"; exit 1; }
import sys
import torch
from pipecoord.safetensors_io import read_safetensors, write_safetensors
m = torch.nn.Linear(2, 3)
m.register_buffer("scale", torch.tensor(0.5))
write_safetensors(sys.argv[1], dict(m.state_dict()))
back = read_safetensors(sys.argv[1])
assert back["scale"].shape == torch.Size([]) and back["scale"].item() == 0.5, back["scale"]
assert torch.equal(back["weight"], m.weight.detach()), "weights"
PY
# The reference model's Llama 3 rotary scaling (what torch workers run for a config with
# rope_type "llama3") against transformers' own (modeling_rope_utils' "llama3" init): the same
# frequencies within float32's rounding (transformers computes them in float32), for two factors.
"$PYTHON" - <<'PY' || { echo "FAIL: Llama 3 rope scaling differs from transformers'"; exit 1; }
import os
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
import transformers
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from pipecoord.reference_model import llama3_frequencies
for factor, original in ((8.0, 8), (32.0, 64)):
    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": factor, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": original}
    config = transformers.LlamaConfig(hidden_size=256, num_attention_heads=4, max_position_embeddings=4 * original,
                                      rope_parameters=rope)
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    d = 64
    base = 500000.0 ** (-2.0 * torch.arange(0, d // 2, dtype=torch.float64) / d)
    ours = llama3_frequencies(base, (factor, 1.0, 4.0, original))
    worst = float(((theirs.double() - ours).abs() / ours).max())
    assert worst < 1e-6, (factor, worst)
    assert float(((base - ours).abs() / base).max()) > 0.5  # it scales something
print("llama3 rope scaling: the reference model's frequencies equal transformers' within 1e-6")
PY
echo "PASS"
