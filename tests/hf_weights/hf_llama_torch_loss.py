#!/usr/bin/python3
"""The loss of a Hugging Face Llama folder on given tokens, computed by transformers' Llama
forward written out in PyTorch (LlamaRMSNorm, rotate_half rotary embeddings, causal attention,
SiLU-gated MLP, untied lm_head, mean cross-entropy), sharing no code with pipecoord. Reads the
folder's config.json and model.safetensors (or the shards of model.safetensors.index.json) with
numpy, as any PyTorch loader would see them.

    hf_llama_torch_loss.py FOLDER BATCH.json   -> prints the mean loss over the micro-batches
BATCH.json: {"microbatches": [{"inputs": [[...], ...], "targets": [[...], ...]}, ...]} (ids per sample)
"""
import json
import os
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": "<f4", "F16": "<f2"}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if t["dtype"] == "BF16":
            v = (np.frombuffer(raw, "<u2").astype("<u4") << 16).view("<f4")
        else:
            v = np.frombuffer(raw, DTYPES[t["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(v.reshape(t["shape"]).copy())
    return out


def load(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        weights = {}
        for shard in sorted(set(json.load(open(index))["weight_map"].values())):
            weights.update(read_safetensors(os.path.join(folder, shard)))
        return weights
    return read_safetensors(os.path.join(folder, "model.safetensors"))


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward_loss(cfg, w, inputs, targets):
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d = h // heads
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    ids = torch.tensor(inputs, dtype=torch.long)
    b, s = ids.shape
    x = w["model.embed_tokens.weight"][ids]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()
    mask = torch.full((s, s), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).view(b, s, heads, d).transpose(1, 2)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(b, s, heads, d).transpose(1, 2)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(b, s, heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-1, -2) / (d ** 0.5) + mask
        o = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        c = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = c @ w[p + "mlp.gate_proj.weight"].T
        up = c @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    logits = rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(b * s, -1).double(),
                                             torch.tensor(targets, dtype=torch.long).reshape(-1)).item()


def main():
    folder, batch = sys.argv[1], json.load(open(sys.argv[2]))
    cfg = json.load(open(os.path.join(folder, "config.json")))
    assert cfg["model_type"] == "llama" and not cfg["tie_word_embeddings"], cfg
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"], cfg
    w = load(folder)
    with torch.no_grad():
        losses = [forward_loss(cfg, w, mb["inputs"], mb["targets"]) for mb in batch["microbatches"]]
    print("%.10f" % (sum(losses) / len(losses)))


if __name__ == "__main__":
    main()
