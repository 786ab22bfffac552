"""What a user's model function receives on a PyTorch worker (docs/pytorch.md):

    def build_stage(shard: StageShard, model: ModelSpec) -> torch.nn.Module

The worker calls it once for every stage (model chunk) its rank holds. The module's forward
takes one tensor: the token ids [b, s] (int64) on the stage with has_embedding, else the previous
stage's output. It returns the activations the next stage takes, float32 [b, s, model.hidden];
on the stage with has_head, the logits [b, s, vocab] (the worker takes the mean token
cross-entropy against the targets; a module with a method loss(output, targets) -> scalar tensor
chooses its own loss). Weights must depend on the layer's index and model.seed only, not on the
shard, so that every placement of the layers trains the same model.

With spec.tp > 1 the shard also names this rank's tensor-parallel place: tp_rank of tp_size, and
tp_group, the torch.distributed process group of the stage's tp_size ranks (they run the same
actions on the same micro-batches). The builder splits its module over that group (e.g.
torch.distributed.tensor.parallel.parallelize_module on DeviceMesh.from_group(tp_group, ...), as
python/examples/reference_stages.py does); the module's input and output stay whole tensors (every
rank of the group sends and receives the full activations of its own pipeline neighbour). A
builder that returns a module without tensor-parallel (DTensor) parameters for tp > 1 fails the
job, rather than train tp full copies.
"""
import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class StageShard:
    """proto StageShard: blocks [first_layer, first_layer + num_layers) of virtual stage `stage`."""

    stage: int
    first_layer: int
    num_layers: int
    has_embedding: bool
    has_head: bool
    tp_rank: int = 0
    tp_size: int = 1
    tp_group: object = None  # torch.distributed ProcessGroup when tp_size > 1

    @staticmethod
    def from_proto(s):
        return StageShard(s.stage, s.first_layer, s.num_layers, s.has_embedding, s.has_head)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """proto ModelSpec (defaults applied by the coordinator: ffn_hidden is set)."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    ffn_hidden: int = 0
    seed: int = 0
    rms_norm_eps: float = 0.0
    rope_theta: float = 0.0
    # Llama 3's rotary scaling: (factor, low_freq_factor, high_freq_factor,
    # original_max_position_embeddings), or None (proto RopeScaling unset).
    rope_scaling: tuple = None
    kv_heads: int = 0  # key/value heads (grouped-query attention); 0: heads
    qkv_bias: bool = False  # q, k, v projections with biases (Qwen2)
    sliding_window: int = 0  # attention sees the last sliding_window tokens (Mistral); 0: all

    @staticmethod
    def from_proto(m):
        names = {f.name for f in dataclasses.fields(ModelSpec)} - {"rope_scaling"}
        fields = {f.name: getattr(m, f.name) for f in m.DESCRIPTOR.fields if f.name in names}
        if m.HasField("rope_scaling") and m.rope_scaling.factor > 0:
            r = m.rope_scaling
            fields["rope_scaling"] = (r.factor, r.low_freq_factor, r.high_freq_factor,
                                      r.original_max_position_embeddings)
        return ModelSpec(**fields)


def load_builder(path):
    """The function named "package.module:function"; ImportError/AttributeError/TypeError with
    the path in the message."""
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 (any failure to import is the user's module's)
        raise ImportError(f"spec.worker.module {path!r}: cannot import {module_name}: {type(e).__name__}: {e}") from e
    fn = getattr(module, attr, None)
    if fn is None:
        raise AttributeError(f"spec.worker.module {path!r}: {module_name} has no {attr}")
    if not callable(fn):
        raise TypeError(f"spec.worker.module {path!r}: {attr} is not callable")
    return fn
