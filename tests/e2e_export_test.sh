#!/usr/bin/env bash
# pipectl export against a live coordinator (issue 18): two workers train a pp 2 job that
# checkpoints to their shared --checkpoint-dir, and `pipectl export` writes the newest step every
# rank saved as a Hugging Face Llama folder. Checked as a user would, from the files alone, with
# code that shares nothing with pipecoord's: config.json's model; model.safetensors's framing
# (header length, JSON header, F32, offsets tiling the data), metadata, tensor names and shapes;
# every value bit for bit the workers' checkpoint of that step, named and laid out as transformers'
# Llama (q_proj and k_proj rows permuted within each head, docs/weights.md). Then bad input: a step
# not checkpointed, and a --checkpoint-dir without the job's files: exit 2, the flag and the rule
# named, nothing written.
source tests/lib.sh
CKPT="$WORK/checkpoints"
start_coordinator
start_workers 2 --checkpoint-dir "$CKPT"

# Steps 0..6, checkpointed every 3 steps: after steps 2 and 5; step 6 is not saved.
job_json "$WORK/job.json" pp=2 steps=7 checkpointEvery=3
job=$("$PIPECTL" submit "$WORK/job.json" --format json | json_field '["jobId"]')
"$PIPECTL" watch "$job" > /dev/null || fail "the job did not succeed"
"$PIPECTL" status "$job" --format json > "$WORK/status.json"
[ "$(json_field '.get("checkpointedSteps", 0)' < "$WORK/status.json")" = 6 ] ||
  fail "checkpointedSteps: want 6 (steps 0..5 saved on every rank): $(cat "$WORK/status.json")"

"$PIPECTL" export "$job" --out "$WORK/export" --checkpoint-dir "$CKPT" > "$WORK/export.out" 2> "$WORK/export.err" ||
  fail "pipectl export failed: $(cat "$WORK/export.err")"
[ ! -s "$WORK/export.err" ] || fail "pipectl export wrote to stderr: $(cat "$WORK/export.err")"

"$PYTHON" - "$WORK/export" "$CKPT/$job" "$job" "$WORK/export.out" <<'PY' || fail "the exported folder"
import json, os, struct, sys
import numpy as np

out, ckpt, job, printed = sys.argv[1:5]
LAYERS, HIDDEN, HEADS, FFN, VOCAB = 4, 32, 4, 128, 64  # tests/lib.sh's model; ffn: 8h/3 up to 64
STEP = 5  # the newest step every rank checkpointed


def check(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)


def read_safetensors(path):
    """(header without __metadata__, metadata, {name: float32 array}); checks the framing."""
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    spans = sorted(tuple(t["data_offsets"]) for t in header.values())
    end = 0
    for a, b in spans:
        check(a == end, "%s: data offsets leave a gap or overlap at byte %d" % (path, a))
        end = b
    check(8 + n + end == len(data), "%s: the tensors cover %d data bytes of %d" % (path, end, len(data) - 8 - n))
    tensors = {}
    for name, t in header.items():
        check(t["dtype"] == "F32", "%s: %s is %s, not F32" % (path, name, t["dtype"]))
        a, b = t["data_offsets"]
        v = np.frombuffer(data[8 + n + a:8 + n + b], "<f4")
        check(v.size == int(np.prod(t["shape"])), "%s: %s: %d values for shape %s" % (path, name, v.size, t["shape"]))
        tensors[name] = v
    return header, metadata, tensors


# transformers' Llama names and shapes ([out, in]) against ours (data/hf_llama_layout.h's table).
names = {"tok_embeddings.weight": ("model.embed_tokens.weight", [VOCAB, HIDDEN]),
         "norm.weight": ("model.norm.weight", [HIDDEN]),
         "output.weight": ("lm_head.weight", [VOCAB, HIDDEN])}
for i in range(LAYERS):
    for ours, hf, shape in [("attention_norm", "input_layernorm", [HIDDEN]),
                            ("attention.wq", "self_attn.q_proj", [HIDDEN, HIDDEN]),
                            ("attention.wk", "self_attn.k_proj", [HIDDEN, HIDDEN]),
                            ("attention.wv", "self_attn.v_proj", [HIDDEN, HIDDEN]),
                            ("attention.wo", "self_attn.o_proj", [HIDDEN, HIDDEN]),
                            ("ffn_norm", "post_attention_layernorm", [HIDDEN]),
                            ("feed_forward.w1", "mlp.gate_proj", [FFN, HIDDEN]),
                            ("feed_forward.w3", "mlp.up_proj", [FFN, HIDDEN]),
                            ("feed_forward.w2", "mlp.down_proj", [HIDDEN, FFN])]:
        names["layers.%d.%s.weight" % (i, ours)] = ("model.layers.%d.%s.weight" % (i, hf), shape)

# The folder: exactly these two files (one file: no --max-shard-bytes).
check(sorted(os.listdir(out)) == ["config.json", "model.safetensors"], "files: %s" % sorted(os.listdir(out)))
config = json.load(open(os.path.join(out, "config.json")))
want = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
        "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS, "head_dim": HIDDEN // HEADS, "vocab_size": VOCAB,
        "max_position_embeddings": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": None,
        "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
        "attention_dropout": 0, "torch_dtype": "float32"}
check(config == want, "config.json: %s, want %s" % (config, want))

header, metadata, exported = read_safetensors(os.path.join(out, "model.safetensors"))
check(metadata == {"format": "pt"}, "model.safetensors metadata: %s" % metadata)
want_shapes = {hf: shape for hf, shape in names.values()}
got_shapes = {name: t["shape"] for name, t in header.items()}
check(got_shapes == want_shapes, "tensors: %s, want %s" % (sorted(got_shapes.items()), sorted(want_shapes.items())))

# The workers' files of that step: rank-G/step-5.safetensors, tensors stageK/NAME/value.
ours = {}
for rank in range(2):
    path = os.path.join(ckpt, "rank-%d" % rank, "step-%d.safetensors" % STEP)
    _, meta, tensors = read_safetensors(path)
    check(meta.get("format") == "pipecoord-rank-checkpoint" and meta.get("step") == str(STEP), "%s: %s" % (path, meta))
    for name, v in tensors.items():
        stage, rest = name.split("/", 1)
        if not rest.endswith("/value"):
            continue  # AdamW's moments stay out of the export
        key = rest[:-len("/value")]
        check(key not in ours, "%s: %s held by two ranks" % (path, key))
        ours[key] = v
check(sorted(ours) == sorted(names), "checkpoint tensors: %s" % sorted(ours))

# Values: bit for bit, q and k with their rows permuted within each head (our row 2i is HF's row
# i, our row 2i+1 HF's row i + d/2).
d = HIDDEN // HEADS
for key, (hf, shape) in names.items():
    v = ours[key].reshape(shape)
    if key.endswith(("attention.wq.weight", "attention.wk.weight")):
        v = v.reshape(HEADS, d // 2, 2, HIDDEN).transpose(0, 2, 1, 3).reshape(shape)
    check(exported[hf].view("<u4").tobytes() == v.view("<u4").tobytes(), "%s differs from the checkpoint's %s" % (hf, key))

# What pipectl printed: the step, the count and size, and that the job's last step is not in it.
count = sum(int(np.prod(s)) for s in want_shapes.values())
line = ("%s: step %d exported to %s (%d tensors, %.1f MiB F32) (not the job's last step: it saves every "
        "spec.checkpointEvery steps)\n" % (job, STEP, out, len(names), count * 4 / 2**20))
check(open(printed).read() == line, "printed %r, want %r" % (open(printed).read(), line))
print("exported %d tensors, %d values, equal to the step %d checkpoint" % (len(names), count, STEP))
PY

# Bad input: exit 2 (the user's input), the flag and the rule named, nothing written.
expect_refused() {  # expect_refused MESSAGE pipectl-export-args...
  local want=$1 rc=0
  shift
  "$PIPECTL" export "$job" --out "$WORK/refused" "$@" > "$WORK/refused.out" 2> "$WORK/refused.err" || rc=$?
  [ "$rc" = 2 ] || fail "export $*: exit $rc, want 2: $(cat "$WORK/refused.err")"
  [ "$(cat "$WORK/refused.err")" = "$want" ] || fail "export $*: said '$(cat "$WORK/refused.err")', want '$want'"
  [ ! -s "$WORK/refused.out" ] && [ ! -e "$WORK/refused" ] || fail "export $*: wrote something"
}
expect_refused "pipectl export: --step: must be below 6 (steps checkpointed on every rank), got 6" \
  --checkpoint-dir "$CKPT" --step 6
mkdir "$WORK/elsewhere"
expect_refused "pipectl export: $WORK/elsewhere/$job/rank-0/step-5.safetensors: not found (--checkpoint-dir must be the workers' folder, shared or copied here; spec.checkpointEvery must be > 0)" \
  --checkpoint-dir "$WORK/elsewhere"
echo "e2e export: ok"
