"""pipecoord's Llama-style decoder written again in PyTorch: an independent reference for the C++
model (worker/model/), and a model PyTorch workers can run.

The model (worker/model/stage_model.h, transformer_block.h, lm_head.h):

    x   = tok_embeddings[tokens]                                  (embedding stage only)
    per block l:
      a  = RMSNorm(x; attention_norm)                             eps 1e-5 unless set
      q, k, v = a Wq^T, a Wk^T, a Wv^T;  RoPE on q and k          interleaved pairs, base 10000
                                                                  unless set (rope_theta)
      x1 = x + softmax(q k^T / sqrt(head_dim), causal) v  Wo^T
      c  = RMSNorm(x1; ffn_norm)
      x  = x1 + (silu(c W1^T) * (c W3^T)) W2^T
    y = RMSNorm(x; norm);  logits = y Wout^T (untied);  loss = mean over tokens of CE   (head)

No biases. RoPE rotates the pair (x[2i], x[2i+1]) of every head by pos * base^(-2i / head_dim),
pos being the token's position inside its sample. Parameter names are the C++ model's
("layers.3.attention.wq.weight", ...), with the GLOBAL layer index, so a stage's state_dict()
matches the tensors a pipecoord stage of the same shard holds.

Optimizer: torch.optim.AdamW with betas (0.9, 0.95), eps 1e-8 (kernels/cpu/adamw.h) and weight
decay on matrices and the embedding only, never on norm gains: see adamw_param_groups().
The loss of a step over m micro-batches is the mean of their mean token losses.

    from pipecoord.reference_model import ModelShape, Stage
    shape = ModelShape(layers=4, hidden=64, heads=4, vocab=256, seq_len=32)
    model = Stage(shape)                                   # the whole model: one stage
    stage = Stage(shape, first_layer=2, num_layers=2, has_embedding=False, has_head=True)
    loss = model(tokens, targets)                          # tokens, targets [b, s] int64
"""
import dataclasses
import math

import torch
import torch.nn.functional as F

RMS_NORM_EPS = 1e-5  # worker/model/model_config.h kRmsNormEps
ROPE_BASE = 10000.0  # kRopeBase
ADAMW_BETAS = (0.9, 0.95)  # kernels/cpu/adamw.h AdamWOptions defaults
ADAMW_EPS = 1e-8


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """proto ModelSpec's fields (worker/model/model_config.h ModelConfig)."""

    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    ffn_hidden: int = 0  # 0: ceil(8h / 3) rounded up to a multiple of 64
    rms_norm_eps: float = 0.0  # 0: 1e-5 (Llama's)
    rope_theta: float = 0.0  # 0: 10000 (Llama's)
    # Llama 3's rotary scaling: (factor, low_freq_factor, high_freq_factor,
    # original_max_position_embeddings), or None.
    rope_scaling: tuple = None
    kv_heads: int = 0  # key/value heads (grouped-query attention); 0: heads
    qkv_bias: bool = False  # q, k, v projections with biases (Qwen2)
    sliding_window: int = 0  # query i sees keys i - w < j <= i (Mistral); 0: every earlier key

    @property
    def kv(self):
        return self.kv_heads if self.kv_heads > 0 else self.heads

    @property
    def ffn(self):
        if self.ffn_hidden > 0:
            return self.ffn_hidden
        third = (8 * self.hidden + 2) // 3
        return (third + 63) // 64 * 64

    @property
    def eps(self):
        return self.rms_norm_eps if self.rms_norm_eps > 0 else RMS_NORM_EPS

    @property
    def rope_base(self):
        return self.rope_theta if self.rope_theta > 0 else ROPE_BASE

    @property
    def head_dim(self):
        return self.hidden // self.heads

    @staticmethod
    def from_spec(spec):
        """From a proto ModelSpec (or anything with its field names). What this model does not run is
        refused by its field name, never run as something else: an explicit head_dim (the C++ CPU
        model runs it) and tied embeddings (a module ties its own)."""
        head_dim = getattr(spec, "head_dim", 0)
        if head_dim and head_dim * spec.heads != spec.hidden:
            raise ValueError(f"model.headDim: the PyTorch reference model runs hidden / heads "
                             f"({spec.hidden // spec.heads}) features per head, got {head_dim}; "
                             f"an explicit head_dim runs on the C++ CPU workers")
        if getattr(spec, "tied_embeddings", False):
            raise ValueError("model.tiedEmbeddings: the PyTorch reference model's head is its own matrix; "
                             "tied embeddings run on the C++ CPU workers")
        scaling = getattr(spec, "rope_scaling", None)
        if scaling is not None and not isinstance(scaling, tuple):  # a proto RopeScaling
            scaling = (scaling.factor, scaling.low_freq_factor, scaling.high_freq_factor,
                       scaling.original_max_position_embeddings) if scaling.factor > 0 else None
        return ModelShape(layers=spec.layers, hidden=spec.hidden, heads=spec.heads, vocab=spec.vocab,
                          seq_len=spec.seq_len, ffn_hidden=getattr(spec, "ffn_hidden", 0),
                          rms_norm_eps=getattr(spec, "rms_norm_eps", 0.0),
                          rope_theta=getattr(spec, "rope_theta", 0.0), rope_scaling=scaling,
                          kv_heads=getattr(spec, "kv_heads", 0), qkv_bias=bool(getattr(spec, "qkv_bias", False)),
                          sliding_window=getattr(spec, "sliding_window", 0))


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, dtype, eps=RMS_NORM_EPS):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def llama3_frequencies(inv, scaling):
    """Llama 3's rotary scaling of the frequencies `inv` (transformers' rope_type "llama3"):
    wavelengths above original / low_freq_factor divided by factor, below original /
    high_freq_factor kept, between them interpolated (as kernels/cpu/rotary.cc's RopeScaling)."""
    factor, low, high, original = scaling
    wavelength = 2 * math.pi / inv
    smooth = (original / wavelength - low) / (high - low)
    scaled = torch.where(wavelength > original / low, inv / factor, inv)
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    return torch.where(medium, (1 - smooth) * inv / factor + smooth * inv, scaled)


def rope_tables(seq, head_dim, dtype, base=ROPE_BASE, scaling=None):
    """cos and sin [seq, head_dim / 2] of the angle pos * base^(-2i / head_dim) (Llama 3's
    scaling applied when given), computed in float64 (as kernels/cpu/rotary.cc does) and then
    cast."""
    i = torch.arange(0, head_dim // 2, dtype=torch.float64)
    inv = base ** (-2.0 * i / head_dim)
    if scaling is not None:
        inv = llama3_frequencies(inv, scaling)
    angle = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def apply_rope(x, cos, sin):
    """x [b, s, heads, head_dim]: rotates the interleaved pairs (2i, 2i + 1) of every head."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class Attention(torch.nn.Module):
    def __init__(self, shape, dtype):
        super().__init__()
        h = shape.hidden
        self.heads = shape.heads
        self.window = shape.sliding_window
        b = shape.qkv_bias  # biases start at zero, as the C++ model's
        self.wq = torch.nn.Linear(h, h, bias=b, dtype=dtype)
        kv = shape.kv * shape.head_dim  # grouped-query attention: fewer key/value heads
        self.wk = torch.nn.Linear(h, kv, bias=b, dtype=dtype)
        self.wv = torch.nn.Linear(h, kv, bias=b, dtype=dtype)
        if b:
            for lin in (self.wq, self.wk, self.wv):
                torch.nn.init.zeros_(lin.bias)
        self.wo = torch.nn.Linear(h, h, bias=False, dtype=dtype)
        cos, sin = rope_tables(shape.seq_len, shape.head_dim, dtype, shape.rope_base, shape.rope_scaling)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, a):
        b, s, h = a.shape
        d = h // self.heads
        # n: the heads this module computes, all of them, or under tensor parallelism
        # (reference_stages.py) this rank's share, its q/k/v projections' width / d.
        q, k, v = self.wq(a), self.wk(a), self.wv(a)
        n, g = q.shape[-1] // d, k.shape[-1] // d
        q = apply_rope(q.view(b, s, n, d), self.rope_cos, self.rope_sin)
        k = apply_rope(k.view(b, s, g, d), self.rope_cos, self.rope_sin)
        v = v.view(b, s, g, d)
        # Query head i reads key/value head i // (n / g) (transformers' repeat_kv).
        k, v = (t.repeat_interleave(n // g, dim=2) for t in (k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [b, n, s, d]
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        hidden = torch.ones(s, s, dtype=torch.bool, device=a.device).triu(1)  # the keys after the query
        if self.window > 0:  # and those the window left behind
            hidden |= torch.ones(s, s, dtype=torch.bool, device=a.device).tril(-self.window)
        probs = scores.masked_fill(hidden, float("-inf")).softmax(-1)
        o = (probs @ v).transpose(1, 2).reshape(b, s, n * d)
        return self.wo(o)


class FeedForward(torch.nn.Module):
    def __init__(self, shape, dtype):
        super().__init__()
        h, f = shape.hidden, shape.ffn
        self.w1 = torch.nn.Linear(h, f, bias=False, dtype=dtype)  # gate
        self.w2 = torch.nn.Linear(f, h, bias=False, dtype=dtype)  # down
        self.w3 = torch.nn.Linear(h, f, bias=False, dtype=dtype)  # up

    def forward(self, c):
        return self.w2(F.silu(self.w1(c)) * self.w3(c))


class Block(torch.nn.Module):
    def __init__(self, shape, dtype):
        super().__init__()
        self.attention_norm = RMSNorm(shape.hidden, dtype, shape.eps)
        self.attention = Attention(shape, dtype)
        self.ffn_norm = RMSNorm(shape.hidden, dtype, shape.eps)
        self.feed_forward = FeedForward(shape, dtype)

    def forward(self, x):
        x1 = x + self.attention(self.attention_norm(x))
        return x1 + self.feed_forward(self.ffn_norm(x1))


class Stage(torch.nn.Module):
    """Blocks [first_layer, first_layer + num_layers) of the model, with the token embedding
    first if has_embedding and the final norm, LM head and loss last if has_head (a pipecoord
    StageShard). The defaults hold the whole model.

    forward(x, targets=None): x is token ids [b, s] (int64) on the embedding stage, activations
    [b, s, h] elsewhere. Returns activations [b, s, h], or on the head stage the mean token
    loss when targets [b, s] are given, else the logits [b, s, vocab].
    """

    def __init__(self, shape, first_layer=0, num_layers=None, has_embedding=True, has_head=True,
                 dtype=torch.float32):
        super().__init__()
        if num_layers is None:
            num_layers = shape.layers - first_layer
        self.shape = shape
        self.first_layer, self.num_layers = first_layer, num_layers
        self.has_embedding, self.has_head = has_embedding, has_head
        if has_embedding:
            self.tok_embeddings = torch.nn.Embedding(shape.vocab, shape.hidden, dtype=dtype)
        # Keys are global layer indices: state_dict() names match the C++ model's.
        self.layers = torch.nn.ModuleDict(
            {str(l): Block(shape, dtype) for l in range(first_layer, first_layer + num_layers)})
        if has_head:
            self.norm = RMSNorm(shape.hidden, dtype, shape.eps)
            self.output = torch.nn.Linear(shape.hidden, shape.vocab, bias=False, dtype=dtype)

    @staticmethod
    def from_shard(shard, spec, dtype=torch.float32):
        """From a proto StageShard and ModelSpec: the (StageShard, ModelSpec) -> Module a
        PyTorch worker calls."""
        return Stage(ModelShape.from_spec(spec), shard.first_layer, shard.num_layers,
                     shard.has_embedding, shard.has_head, dtype)

    def forward(self, x, targets=None):
        if self.has_embedding:
            x = self.tok_embeddings(x)
        for block in self.layers.values():
            x = block(x)
        if not self.has_head:
            return x
        logits = self.output(self.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def decays(name):
    """Whether AdamW decays the parameter `name`: matrices and the embedding, not norm gains or biases."""
    return not name.endswith("norm.weight") and not name.endswith(".bias")


def adamw_param_groups(module, weight_decay):
    """torch.optim.AdamW parameter groups with pipecoord's decay rule (decays())."""
    named = list(module.named_parameters())
    return [
        {"params": [p for n, p in named if decays(n)], "weight_decay": weight_decay},
        {"params": [p for n, p in named if not decays(n)], "weight_decay": 0.0},
    ]


def make_adamw(module, lr, weight_decay=0.0):
    """The optimizer a pipecoord job runs (StageModel::OptimizerStep), from PyTorch's AdamW."""
    return torch.optim.AdamW(adamw_param_groups(module, weight_decay), lr=lr, betas=ADAMW_BETAS,
                             eps=ADAMW_EPS)


def load_weights(module, tensors):
    """Copies tensors {name: tensor} into the module's parameters (cast to their dtype); every
    parameter must be there with its shape. Extra names are ignored (another stage's)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name not in tensors:
                raise KeyError("no tensor %r for the module's parameter" % name)
            t = tensors[name]
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError("tensor %r: shape %s, the parameter's is %s" %
                                 (name, list(t.shape), list(p.shape)))
            p.copy_(t.to(p.dtype))
