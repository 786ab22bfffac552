"""The user function a PyTorch worker calls for pipecoord's own Llama-style model
(python/pipecoord/reference_model.py), with seeded weights: every parameter is drawn from a
generator keyed by the model's seed and the parameter's global name, so any placement of the
layers trains the same model (docs/pytorch.md).

    spec: "worker": {"kind": "torch", "module": "reference_stages:build_stage"}
    worker: python3 -m pipecoord.torch_worker --coordinator ADDR --import-path python/examples
"""
import torch

from pipecoord.reference_model import Stage
from pipecoord.synthetic_data import combine_seeds, hash_string


def seeded_init(module, seed):
    """Norm gains 1; every matrix normal with std 1/sqrt(fan in), from its own generator."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
                continue
            gen = torch.Generator().manual_seed(combine_seeds(seed, hash_string(name)) & ((1 << 63) - 1))
            std = 1.0 if name.endswith("tok_embeddings.weight") else p.shape[1] ** -0.5
            p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * std)


def build_stage(shard, model):
    """(StageShard, ModelSpec) -> the stage's torch.nn.Module."""
    stage = Stage.from_shard(shard, model)
    seeded_init(stage, model.seed)
    return stage
