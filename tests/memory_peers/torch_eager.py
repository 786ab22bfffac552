"""The eager recipe (memory/eager_recipe.cc) against PyTorch 2 running Hugging Face transformers'
own LlamaDecoderLayer (issue 25, section 5): the framework the recipe models counts for it.
  1. One layer's forward: the bytes autograd saves (unique storages, through saved-tensor
     hooks), the weights and the model-wide RoPE cos/sin (computed once per model, not per
     layer) left out, against the recipe's block (`pipectl memory --recipe eager`): eager and
     sdpa attention, multi-head and grouped-query, and an explicit head_dim (32 for h 64 and 4
     heads: q and o twice the model width), bf16.
  2. A 1F1B stage: rank 1 of pp 4 with 8 micro-batches holds as many forwards as the schedule
     says at its peak (pipectl's live_microbatches); the stage's two layers run that many
     forwards with every graph held: the unique bytes held against pipectl's activations for
     that rank.
  3. ZB-H1's split backward: between B and W a rank keeps each linear's input and the gradient
     of its output (dW = grad^T x); both measured with module hooks on one layer's forward and
     backward, against the recipe's w_bytes.
Exact equality, or the test fails and prints both sides.
"""
import argparse
import json
import subprocess
import sys

import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

S, B, H, A, F, V = 32, 2, 64, 4, 176, 128
failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def ours(pipectl, g, attention, extra=()):
    args = [pipectl, "memory", "--model", "llama2-7b", "--layers", "1", "--hidden", H, "--ffn", F, "--heads", A,
            "--kv-heads", g, "--vocab", V, "--seq-len", S, "--micro-batch", B, "--attention", attention,
            "--recipe", "eager", "--dtype", "bf16", "--format", "json", *extra]
    out = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL: pipectl memory: {out.stderr}")
    return json.loads(out.stdout)


class Layers:
    """n LlamaDecoderLayers of transformers in bf16, with the model-wide RoPE and mask."""

    def __init__(self, g, attention, n=1, head_dim=None):
        extra = {} if head_dim is None else {"head_dim": head_dim}
        cfg = LlamaConfig(hidden_size=H, intermediate_size=F, num_attention_heads=A, num_key_value_heads=g,
                          num_hidden_layers=n, vocab_size=V, max_position_embeddings=S, attention_dropout=0.0, **extra)
        cfg._attn_implementation = "eager" if attention == "eager" else "sdpa"
        torch.manual_seed(0)
        self.layers = [LlamaDecoderLayer(cfg, layer_idx=i).to(torch.bfloat16) for i in range(n)]
        self.eager = attention == "eager"
        pos = torch.arange(S)[None].expand(B, S)
        self.pos = pos
        self.cos, self.sin = LlamaRotaryEmbedding(cfg)(torch.zeros(1, dtype=torch.bfloat16), pos)
        self.mask = torch.full((S, S), float("-inf")).triu(1)[None, None].expand(B, 1, S, S).to(torch.bfloat16)
        self.model_wide = {t.untyped_storage().data_ptr() for t in (self.cos, self.sin, self.mask)}
        self.weights = {p.untyped_storage().data_ptr() for layer in self.layers for p in layer.parameters()}

    def forward(self, x):
        for layer in self.layers:
            out = layer(x, attention_mask=self.mask if self.eager else None,
                        position_embeddings=(self.cos, self.sin), position_ids=self.pos)
            x = out[0] if isinstance(out, tuple) else out
        return x


def saved_bytes(stage, forwards):
    """Unique bytes autograd holds after `forwards` forwards of the stage, every graph kept (held
    in `outs` while counting: a freed graph's storage could come back under another's address)."""
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    outs = []
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        for _ in range(forwards):
            outs.append(stage.forward(torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)))
    skip = stage.weights | stage.model_wide
    return sum(n for ptr, n in storages.items() if ptr not in skip)


def w_bytes(stage):
    """Each linear's input (unique storages) and the gradient of its output, from one layer."""
    inputs, grads = {}, []
    hooks = []
    for module in stage.layers[0].modules():
        if isinstance(module, torch.nn.Linear):
            hooks.append(module.register_forward_hook(
                lambda m, args, out: inputs.__setitem__(args[0].untyped_storage().data_ptr(),
                                                        args[0].untyped_storage().nbytes())))
            hooks.append(module.register_full_backward_hook(
                lambda m, gin, gout: grads.append(gout[0].numel() * gout[0].element_size())))
    x = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
    stage.forward(x).float().sum().backward()
    for h in hooks:
        h.remove()
    return sum(inputs.values()) + sum(grads)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipectl", required=True)
    args = ap.parse_args()
    import transformers
    print(f"PyTorch {torch.__version__}, transformers {transformers.__version__}; s {S}, b {B}, h {H}, a {A}, f {F}")
    for attention in ("eager", "flash"):
        for g, d in ((A, None), (2, None), (2, 32)):
            name = f"{'eager' if attention == 'eager' else 'sdpa'} attention, {g} kv heads of {A}" + (
                f", head_dim {d}" if d else "")
            measured = saved_bytes(Layers(g, attention, head_dim=d), 1)
            recipe = ours(args.pipectl, g, attention, ["--head-dim", d] if d else [])["block"]
            check(measured == recipe["saved_bytes"],
                  f"{name}: a layer's forward saves {measured:,} B (PyTorch); the recipe {recipe['saved_bytes']:,} B")
            measured_w = w_bytes(Layers(g, attention, head_dim=d))
            check(measured_w == recipe["w_bytes"],
                  f"{name}: kept from B to W (linear inputs + output gradients) {measured_w:,} B; the recipe "
                  f"{recipe['w_bytes']:,} B")
    # A 1F1B stage: rank 1 of pp 4, two layers a stage.
    for attention in ("eager", "flash"):
        j = ours(args.pipectl, 2, attention, ["--layers", "8", "--pp", "4", "--microbatches", "8", "--schedule", "1f1b"])
        rank = j["ranks"][1]
        stage = Layers(2, attention, n=rank["layers"])
        measured = saved_bytes(stage, rank["live_microbatches"])
        check(measured == rank["activations_bytes"],
              f"1F1B rank 1 of pp 4 ({attention}): {rank['live_microbatches']} forwards of its {rank['layers']} layers "
              f"held: {measured:,} B (PyTorch); pipectl's activations {rank['activations_bytes']:,} B")
    if failures:
        sys.exit(f"FAIL: {len(failures)} comparison(s) off")
    print("torch eager peer: ok")


if __name__ == "__main__":
    main()
