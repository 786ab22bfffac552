"""memory/'s Megatron recipe against Megatron's own numbers (issue 25, section 5).

Two peers, neither written here:
  * the theoretical memory formulas Megatron-LM prints at start-up (weights and optimizer
    states on the most loaded shard; activations of the first stage, for selective recompute
    with sequence parallelism), as published on PyPI in megatron-bridge 0.3.1
    (megatron/bridge/training/utils/theoretical_memory_utils.py). megatron-core's own wheel
    (0.16.1, tools/requirements.txt) does not ship them: they live in Megatron-LM's
    megatron/training, which has no wheel. The module file is run as published, read from the
    wheel (sha256 pinned); its two imports from the rest of megatron-bridge, whose package pulls
    in transformers and Transformer Engine, are a type annotation and the vocabulary padding,
    which is off here (both sides count the vocabulary as given);
  * megatron-core 0.16.1's model itself, built on the CPU (its local layer spec): its parameters
    counted, and what autograd saves in its MLP measured (saved_tensors_hooks), as the judge
    where the formulas and the recipe differ.
Each comparison asserts the exact difference and prints its cause: a change on either side
fails this test.
"""
import argparse
import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import types
import zipfile
from types import SimpleNamespace as NS

BRIDGE_WHEEL = "megatron_bridge-0.3.1-py3-none-any.whl"
BRIDGE_SHA256 = "4d9a9ad679bd927a84f923e5239512d72af7fa47331b749a8f275592c2920616"
THEORY = "megatron/bridge/training/utils/theoretical_memory_utils.py"

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def no_padding(*_args, **_kwargs):
    raise AssertionError("vocabulary padding is off in these configurations")


def load_theory(wheels):
    path = os.path.join(wheels, BRIDGE_WHEEL)
    if not os.path.exists(path):
        sys.exit(f"FAIL: {path} not found: tools/python_env.sh downloads it (run tools/setup.sh)")
    blob = open(path, "rb").read()
    digest = hashlib.sha256(blob).hexdigest()
    if digest != BRIDGE_SHA256:
        sys.exit(f"FAIL: {path}: sha256 {digest}, pinned {BRIDGE_SHA256}")
    src = zipfile.ZipFile(path).read(THEORY).decode()
    stubs = {
        "megatron.bridge": {},
        "megatron.bridge.training": {},
        "megatron.bridge.utils": {},
        "megatron.bridge.training.config": {"ConfigContainer": object},
        "megatron.bridge.utils.vocab_utils": {"calculate_padded_vocab_size": no_padding},
    }
    before = {name: sys.modules.get(name) for name in stubs}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    theory = types.ModuleType("theoretical_memory_utils")
    try:
        exec(compile(src, THEORY, "exec"), theory.__dict__)
    finally:
        for name, module in before.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return theory


# A configuration: the model as pipectl's flags and the peers' names, and the training layout.
class Config:
    def __init__(self, name, L, h, a, g, f, v, s, norm, mlp, dropout, b, tp, pp, dp, m, attention, d=None):
        self.__dict__.update(locals())  # d: features per head when not h / a (megatron's kv_channels)
        del self.__dict__["self"]

    def pipectl(self, pipectl):
        """pipectl memory's JSON for this configuration (run once, kept)."""
        if getattr(self, "_json", None) is not None:
            return self._json
        args = [pipectl, "memory", "--model", "llama2-7b", "--layers", self.L, "--hidden", self.h,
                "--heads", self.a, "--kv-heads", self.g, "--ffn", self.f, "--vocab", self.v, "--seq-len", self.s,
                "--norm", self.norm, "--mlp", self.mlp, "--attention", self.attention, "--tied-embeddings=false",
                "--linear-bias=false", "--dropout=" + ("true" if self.dropout else "false"),
                "--micro-batch", self.b, "--microbatches", self.m, "--tp", self.tp, "--sp", "--pp", self.pp,
                "--dp", self.dp, "--zero", 1, "--recompute", "selective", "--dtype", "bf16",
                "--recipe", "megatron", "--schedule", "1f1b", "--format", "json",
                *(["--head-dim", self.d] if self.d else [])]
        out = subprocess.run([str(a) for a in args], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"FAIL: pipectl memory for {self.name}: {out.stderr}")
        self._json = json.loads(out.stdout)
        return self._json

    def theirs(self, F):
        model = NS(kv_channels=self.h // self.a, num_attention_heads=self.a, hidden_size=self.h,
                   num_query_groups=self.g, num_moe_experts=None, gated_linear_unit=self.mlp == "swiglu",
                   activation_func=F.silu if self.mlp == "swiglu" else F.gelu, num_layers=self.L,
                   ffn_hidden_size=self.f, share_embeddings_and_output_weights=False,
                   pipeline_model_parallel_size=self.pp, tensor_model_parallel_size=self.tp,
                   vocab_size=self.v, should_pad_vocab=False, seq_length=self.s,
                   virtual_pipeline_model_parallel_size=None, sequence_parallel=True,
                   recompute_granularity="selective")
        return NS(model=model, train=NS(micro_batch_size=self.b),
                  optimizer=NS(use_distributed_optimizer=True), data_parallel_size=self.dp)

    # Weights per layer in the tp-split matrices: q and the output projection h x h each, k and v
    # h x (g/a)h each; fc1 2f x h (SwiGLU's gate and up) or f x h, fc2 h x f.
    def matrices(self):
        return 2 * self.h * self.h * (1 + self.g / self.a) + (3 if self.mlp == "swiglu" else 2) * self.h * self.f

    def norm_params(self):
        return 2 * self.h if self.norm == "rmsnorm" else 4 * self.h  # two norms a layer (LayerNorm: + bias)


def weights(cfg, theory, F, pipectl):
    """Weights and optimizer states on rank 0 (the embedding and the first L/pp layers)."""
    ours = cfg.pipectl(pipectl)["ranks"][0]
    ours_bytes = ours["params_bytes"] + ours["grads_bytes"] + ours["optimizer_bytes"] + ours["grad_copy_bytes"]
    theirs_bytes = theory.compute_weight_and_optimizer_memory(cfg.theirs(F))
    per_param = 6 + 12 / cfg.dp  # bf16 weights, fp32 main grads, fp32 master + 2 moments sharded over dp
    theirs_params = theirs_bytes / per_param
    # Their norms: 4h a layer whatever the norm (LayerNorm's weight and bias) and the final norm's
    # 2h spread over the stages, all split over tp; the model's (megatron-core, counted below):
    # the norm's own weights, replicated on every tp rank, the final norm on the last stage only.
    want = (cfg.L * 4 * cfg.h + 2 * cfg.h) / (cfg.pp * cfg.tp) - (cfg.L / cfg.pp) * cfg.norm_params()
    diff = theirs_params - ours["params"]
    check(abs(ours_bytes - ours["params"] * per_param) < 1,
          f"{cfg.name}: our rank 0 bytes = params x (6 + 12/dp) = {per_param:g} bytes each, as theirs")
    check(abs(diff - want) < 1e-6 * ours["params"],
          f"{cfg.name}: weights + optimizer on rank 0: ours {ours_bytes / 2**30:.4f} GiB ({ours['params']:,} "
          f"params), theirs {theirs_bytes / 2**30:.4f} GiB ({theirs_params:,.0f}); theirs - ours = "
          f"{diff:,.0f} params = the norms' count ({want:,.0f})")
    return ours


def activations(cfg, theory, F, pipectl):
    """Activations of the first stage under 1F1B, selective recompute, sequence parallelism."""
    j = cfg.pipectl(pipectl)
    sbh = cfg.s * cfg.b * cfg.h
    # What a layer keeps after selective recompute drops the attention core's tensors (sbh units,
    # the whole layer: ours is per tp rank with sequence parallelism).
    ours_layer = j["block"]["stored_bytes"] * cfg.tp / sbh
    # Their per-layer term, sbh (18 + 4f/h) / t: the paper's 34 sbh at f = 4h (Korthikanti et al.
    # table 2): attention 11 (with a one-byte dropout mask), two norms' inputs 4, and a GeLU MLP
    # 3 + 4f/h (fc1 input 2, GeLU input and output 2f/h each, a dropout mask 1).
    theirs_layer = 18 + 4 * cfg.f / cfg.h
    kv = cfg.g / cfg.a
    masks = 0 if cfg.dropout else 2  # theirs keeps two one-byte masks a layer, dropout or not
    # SwiGLU (get_training_info's, unfused): fc1 output 4f/h, SiLU output 2f/h, product 2f/h
    # against GeLU's 4f/h; GQA: k and v are g/a as wide (2 + 2 at g = a; their own TODO).
    swiglu = 4 * cfg.f / cfg.h if cfg.mlp == "swiglu" else 0
    gqa = 4 * (1 - kv)
    # Flash attention keeps its output (2, the input of its backward); the paper's selective
    # recompute keeps none of the core's tensors.
    flash = 2 if cfg.attention == "flash" else 0
    want = masks - swiglu + gqa - flash
    diff = theirs_layer - ours_layer
    check(abs(diff - want) < 1e-9, f"{cfg.name}: activations a layer: ours {ours_layer:.4f} sbh, theirs "
          f"{theirs_layer:.4f} sbh; theirs - ours = {diff:+.4f} = dropout masks {masks} - SwiGLU's extra "
          f"{swiglu:.4f} + GQA's narrower k, v {gqa:.4f} - flash output {flash}")
    theirs_first = theory.compute_activation_memory(cfg.theirs(F), num_microbatches=cfg.m)
    ours_first = j["ranks"][0]["activations_bytes"]
    in_flight = min(cfg.m, cfg.pp)
    # Beyond the layers: their first stage adds the token ids, 8 bytes each (int64), and an
    # embedding dropout mask, for pp micro-batches, whatever the job's dropout; ours keeps the
    # mask when the model has dropout and not the token ids (an input, not an activation).
    extra_theirs = (8 * cfg.s * cfg.b * cfg.pp + cfg.s * cfg.b * cfg.h * cfg.pp) * min(1, cfg.m / cfg.pp) / cfg.tp
    extra_ours = (cfg.s * cfg.b * cfg.h * in_flight / cfg.tp) if cfg.dropout else 0
    want_first = cfg.L * diff * sbh / cfg.tp * min(1, cfg.m / cfg.pp) + extra_theirs - extra_ours
    check(abs((theirs_first - ours_first) - want_first) < 1e-6 * ours_first,
          f"{cfg.name}: first-stage activations: ours {ours_first / 2**30:.4f} GiB, theirs "
          f"{theirs_first / 2**30:.4f} GiB; theirs - ours = the layers' difference x L x min(1, m/p) "
          f"+ token ids and embedding mask ({(theirs_first - ours_first) / 2**20:+.2f} MiB)")


class MegatronCore:
    """megatron-core 0.16.1 on the CPU, one process: tp 1, pp 1 (the layers a stage holds are
    counted by name). Its local spec asks for the CUDA device in two places that do not compute
    (a global buffer's device, the model-parallel RNG tracker for attention dropout, off here)."""

    def __init__(self):
        import torch
        self.torch = torch
        torch.cuda.current_device = lambda: "cpu"
        with socket.socket() as probe:  # a free port for the one-process gloo group
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
        from megatron.core import parallel_state, tensor_parallel
        parallel_state.initialize_model_parallel(1, 1)
        tensor_parallel.get_cuda_rng_tracker().fork = lambda *a, **k: contextlib.nullcontext()

    def config(self, cfg, layers, fusion=False):
        from megatron.core.transformer.transformer_config import TransformerConfig
        F = self.torch.nn.functional
        return TransformerConfig(
            num_layers=layers, hidden_size=cfg.h, num_attention_heads=cfg.a, num_query_groups=cfg.g,
            kv_channels=cfg.d,  # None: h / a
            ffn_hidden_size=cfg.f, gated_linear_unit=cfg.mlp == "swiglu",
            activation_func=F.silu if cfg.mlp == "swiglu" else F.gelu,
            normalization="RMSNorm" if cfg.norm == "rmsnorm" else "LayerNorm", add_bias_linear=False,
            use_cpu_initialization=True, hidden_dropout=0.0, attention_dropout=0.0,
            bias_activation_fusion=fusion, gradient_accumulation_fusion=False, bf16=True,
            params_dtype=self.torch.bfloat16)

    def spec(self, cfg):
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        return get_gpt_layer_local_spec(normalization="RMSNorm" if cfg.norm == "rmsnorm" else "LayerNorm")

    def stage0_params(self, cfg):
        """Parameters of the embedding and the first L/pp layers: (split over tp, replicated)."""
        from megatron.core.models.gpt import GPTModel
        model = GPTModel(config=self.config(cfg, cfg.L), transformer_layer_spec=self.spec(cfg),
                         vocab_size=cfg.v, max_sequence_length=cfg.s, position_embedding_type="rope",
                         share_embeddings_and_output_weights=False)
        split = replicated = 0
        for name, p in model.named_parameters():
            layer = name.split(".")[2] if name.startswith("decoder.layers.") else None
            if not (name.startswith("embedding.") or (layer is not None and int(layer) < cfg.L // cfg.pp)):
                continue
            if getattr(p, "tensor_model_parallel", False):
                split += p.numel()
            else:
                replicated += p.numel()
        return split, replicated

    def mlp_saved(self, cfg, fusion):
        """Bytes autograd saves in one MLP forward (bf16, s x b tokens), the weights left out."""
        from megatron.core.transformer.spec_utils import build_module
        mlp = build_module(self.spec(cfg).submodules.mlp, config=self.config(cfg, 1, fusion))
        x = self.torch.randn(cfg.s, cfg.b, cfg.h, dtype=self.torch.bfloat16, requires_grad=True)
        storages = {}

        def pack(t):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t
        weights = {p.untyped_storage().data_ptr() for p in mlp.parameters()}
        with self.torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            mlp(x)
        return sum(n for ptr, n in storages.items() if ptr not in weights)


def judge(cfg, pipectl, core):
    """The configuration at small sizes, the same structure: megatron-core's model counted."""
    split, replicated = core.stage0_params(cfg)
    ours = cfg.pipectl(pipectl)["ranks"][0]["params"]
    model = split / cfg.tp + replicated
    check(ours == model, f"{cfg.name}: rank 0 holds {ours:,} parameters; megatron-core's model "
          f"{model:,.0f} ({split:,} split over tp {cfg.tp}, {replicated:,} replicated: the norms)")
    ours_mlp = sum(t["bytes"] for t in cfg.pipectl(pipectl)["block"]["tensors"] if t["group"] == "mlp") * cfg.tp
    if cfg.mlp != "swiglu":
        return
    sbh, fh = cfg.s * cfg.b * cfg.h, cfg.f / cfg.h
    unfused, fused = core.mlp_saved(cfg, False), core.mlp_saved(cfg, True)
    # fc1 input 2; fc1 output 4f/h; unfused: SiLU output 2f/h, x_linear + glu_linear_offset 2f/h
    # (a copy megatron-core 0.16's unfused GLU makes), the product 2f/h; fused (bias_swiglu_impl,
    # Megatron-LM's default --bias-swiglu-fusion): only the product besides.
    check(unfused == (2 + 10 * fh) * sbh and fused == (2 + 6 * fh) * sbh and ours_mlp == (2 + 8 * fh) * sbh,
          f"{cfg.name}: MLP saves (sbh): megatron-core unfused {unfused / sbh:.4f} = 2 + 10f/h, fused (Megatron-LM's "
          f"default) {fused / sbh:.4f} = 2 + 6f/h, our recipe {ours_mlp / sbh:.4f} = 2 + 8f/h (get_training_info's "
          f"SwiGLU), theirs 3 + 4f/h = {3 + 4 * fh:.4f} (a GeLU MLP's, with its dropout mask)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipectl", required=True)
    ap.add_argument("--wheels", required=True, help="the folder holding " + BRIDGE_WHEEL)
    args = ap.parse_args()
    import torch
    F = torch.nn.functional
    theory = load_theory(args.wheels)
    full = [
        # Llama 2 7B and Llama 3 8B (GQA) as Megatron trains them: tp 2 with sp, pp 2 / 4, dp 4 / 2.
        Config("llama2-7b tp2 pp2 dp4", 32, 4096, 32, 32, 11008, 32000, 4096, "rmsnorm", "swiglu", False, 1, 2, 2, 4, 8, "flash"),
        Config("llama3-8b tp2 pp4 dp2", 32, 4096, 32, 8, 14336, 128256, 8192, "rmsnorm", "swiglu", False, 1, 2, 4, 2, 16, "flash"),
        # GPT-3 style, where the paper's formula is exact: LayerNorm, GeLU, f = 4h, dropout.
        Config("gpt 2.7b tp4 pp4 dp2", 32, 2560, 32, 32, 10240, 51200, 2048, "layernorm", "gelu", True, 2, 4, 4, 2, 8, "eager"),
    ]
    small = [
        Config("small llama tp2 pp2", 4, 64, 4, 4, 176, 128, 32, "rmsnorm", "swiglu", False, 2, 2, 2, 1, 4, "flash"),
        Config("small gqa tp1 pp2", 4, 64, 4, 2, 176, 128, 32, "rmsnorm", "swiglu", False, 2, 1, 2, 1, 4, "flash"),
        Config("small gpt tp2 pp2", 4, 64, 4, 4, 256, 128, 32, "layernorm", "gelu", True, 2, 2, 2, 1, 4, "eager"),
    ]
    print("== the formulas (megatron-bridge 0.3.1's theoretical_memory_utils) against our Megatron recipe")
    for cfg in full:
        weights(cfg, theory, F, args.pipectl)
        activations(cfg, theory, F, args.pipectl)
    print("== the judge: megatron-core 0.16.1's model on the CPU")
    core = MegatronCore()
    for cfg in small:
        weights(cfg, theory, F, args.pipectl)
        judge(cfg, args.pipectl, core)
    # An explicit head_dim (megatron's kv_channels 32 for h 64 and 4 heads: q and o twice the width):
    # the model's count only (the formulas above write h for q and o).
    judge(Config("small head_dim 32 tp2 pp2", 4, 64, 4, 2, 176, 128, 32, "rmsnorm", "swiglu", False, 2, 2, 2, 1, 4,
                 "flash", d=32), args.pipectl, core)
    if failures:
        sys.exit(f"FAIL: {len(failures)} comparison(s) off")
    print("megatron peer: ok")


if __name__ == "__main__":
    main()
