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


def tensor_parallel_plan(stage):
    """Megatron's split as PyTorch's parallel styles: q, k, v, w1, w3 column-parallel (each rank its
    heads' and its SwiGLU width's rows), wo and w2 row-parallel (their outputs summed over the
    group), the embedding split by vocabulary rows (RowwiseParallel on an Embedding), the LM head
    column-parallel with its logits gathered (every rank takes the loss on the whole vocabulary;
    the C++ workers' vocabulary-parallel cross-entropy is not reproduced here). Norms stay whole."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan = {}
    for l in stage.layers:
        for name in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w1", "feed_forward.w3"):
            plan[f"layers.{l}.{name}"] = ColwiseParallel()
        for name in ("attention.wo", "feed_forward.w2"):
            plan[f"layers.{l}.{name}"] = RowwiseParallel()
    if stage.has_embedding:
        plan["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate())
    if stage.has_head:
        plan["output"] = ColwiseParallel(output_layouts=Replicate())
    return plan


def build_stage(shard, model):
    """(StageShard, ModelSpec) -> the stage's torch.nn.Module; with shard.tp_size > 1 split over
    shard.tp_group (the seeded whole tensors cut by PyTorch's DTensor, so every tp trains the same
    model)."""
    stage = Stage.from_shard(shard, model)
    seeded_init(stage, model.seed)
    if shard.tp_size > 1:
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor.parallel import parallelize_module
        if model.heads % shard.tp_size:
            raise ValueError(f"tp {shard.tp_size} does not divide the {model.heads} heads")
        mesh = DeviceMesh.from_group(shard.tp_group, "cpu")
        parallelize_module(stage, mesh, tensor_parallel_plan(stage))
    return stage
