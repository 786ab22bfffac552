#!/usr/bin/python3
"""Writes a tiny Hugging Face Llama checkpoint with numpy (tools/requirements.txt's), for
data/hf_llama_weights_test: an independent writer, and an independent statement of the rotary
row permutation (transformers' convert_llama_weights_to_hf.py permutes Meta's interleaved rows
into rotate_half's split halves; this script states the inverse, numpy's way).

    write_hf_llama.py OUTDIR

Model: 2 layers, hidden 8, 2 heads (head_dim 4), intermediate 12, vocab 10.
OUTDIR/single/model.safetensors      every weight, HF names; bf16 for the norms, f16 for
                                     the embedding, f32 for the rest (values exact in each),
                                     plus layer 0's legacy rotary_emb.inv_freq buffer
OUTDIR/sharded/model-0000K-of-00002.safetensors + model.safetensors.index.json   the same
                                     weights, f32, split after layer 0
OUTDIR/expected.safetensors          what pipecoord must load: its own names, f32, q/k rows
                                     in the interleaved order
"""
import json
import os
import struct
import sys

import numpy as np

LAYERS, HIDDEN, HEADS, FFN, VOCAB = 2, 8, 2, 12, 10
HEAD_DIM = HIDDEN // HEADS

LAYER = [  # (ours, hf, shape)
    ("attention_norm.weight", "input_layernorm.weight", (HIDDEN,)),
    ("attention.wq.weight", "self_attn.q_proj.weight", (HIDDEN, HIDDEN)),
    ("attention.wk.weight", "self_attn.k_proj.weight", (HIDDEN, HIDDEN)),
    ("attention.wv.weight", "self_attn.v_proj.weight", (HIDDEN, HIDDEN)),
    ("attention.wo.weight", "self_attn.o_proj.weight", (HIDDEN, HIDDEN)),
    ("ffn_norm.weight", "post_attention_layernorm.weight", (HIDDEN,)),
    ("feed_forward.w1.weight", "mlp.gate_proj.weight", (FFN, HIDDEN)),
    ("feed_forward.w2.weight", "mlp.down_proj.weight", (HIDDEN, FFN)),
    ("feed_forward.w3.weight", "mlp.up_proj.weight", (FFN, HIDDEN)),
]


def tensors():
    """(ours, hf, values) in model order; values are multiples of 1/8 below 256: exact in f16 and bf16."""
    out = [("tok_embeddings.weight", "model.embed_tokens.weight", (VOCAB, HIDDEN))]
    for l in range(LAYERS):
        out += [(f"layers.{l}.{o}", f"model.layers.{l}.{h}", s) for o, h, s in LAYER]
    out += [("norm.weight", "model.norm.weight", (HIDDEN,)), ("output.weight", "lm_head.weight", (VOCAB, HIDDEN))]
    result = []
    for k, (ours, hf, shape) in enumerate(out):
        n = int(np.prod(shape))
        values = ((np.arange(n) * 7 + k * 13) % 41 - 20).astype(np.float32) / 8.0
        result.append((ours, hf, values.reshape(shape)))
    return result


def to_interleaved(w):
    """HF rows (per head: the first halves of the pairs, then the second halves) -> pipecoord's (pairs adjacent)."""
    rows, cols = w.shape
    return w.reshape(HEADS, 2, HEAD_DIM // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def raw(values, dtype):
    if dtype == "F32":
        return values.astype("<f4").tobytes()
    if dtype == "F16":
        return values.astype("<f2").tobytes()
    if dtype == "BF16":  # the high half of each float32 (exact for these values)
        return (values.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    raise ValueError(dtype)


def write(path, entries):
    """entries: (name, dtype, shape, bytes); header in name order, padded to 8 like the reference writer."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, b in sorted(entries):
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    out = sys.argv[1]
    for sub in ("single", "sharded"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    ts = tensors()
    single = []
    for ours, hf, v in ts:
        dtype = "BF16" if "norm" in hf else "F16" if "embed" in hf else "F32"
        single.append((hf, dtype, v.shape, raw(v, dtype)))
    inv = np.arange(HEAD_DIM // 2, dtype=np.float32)  # any values: the loader must ignore it
    single.append(("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", inv.shape, raw(inv, "F32")))
    write(os.path.join(out, "single", "model.safetensors"), single)

    first = [t for t in ts if t[1].startswith("model.embed") or t[1].startswith("model.layers.0.")]
    rest = [t for t in ts if t not in first]
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    for shard, part in zip(names, (first, rest)):
        write(os.path.join(out, "sharded", shard), [(hf, "F32", v.shape, raw(v, "F32")) for _, hf, v in part])
        weight_map.update({hf: shard for _, hf, _ in part})
    total = sum(v.size * 4 for _, _, v in ts)
    with open(os.path.join(out, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)

    expected = []
    for ours, hf, v in ts:
        if hf.endswith("q_proj.weight") or hf.endswith("k_proj.weight"):
            v = to_interleaved(v)
        expected.append((ours, "F32", v.shape, raw(v, "F32")))
    write(os.path.join(out, "expected.safetensors"), expected)


if __name__ == "__main__":
    main()
