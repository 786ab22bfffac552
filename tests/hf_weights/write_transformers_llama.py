#!/usr/bin/env python3
"""A tiny Llama checkpoint written by Hugging Face transformers itself (LlamaForCausalLM with random
weights, save_pretrained in shards with its model.safetensors.index.json), and transformers' own
loss of it on step 0's micro-batches of the job hf_round_trip_test runs (pipecoord's synthetic
token stream, python/pipecoord/synthetic_data.py, the C++ stream bit for bit), and the gradients
transformers' autograd gives every weight for that step's loss (the mean of the micro-batches'
mean token losses; computed in float64 from the same weights), in grads/model.safetensors under
the weights' own names, and its logits of
those micro-batches (logits/model.safetensors: "mb0".."mb3", [samples, tokens, vocab] F32).

    write_transformers_llama.py OUT_DIR [llama3|llama32|llama_head_dim|mistral|mistral_window|qwen2|qwen2_window] -> OUT_DIR/{config.json, model-*.safetensors,
                                                     model.safetensors.index.json, loss.txt,
                                                     grads/model.safetensors,
                                                     logits/model.safetensors}
llama3: Llama 3 as it ships: grouped-query attention (2 key/value heads for 4 query heads) and
Llama 3's rotary scaling (rope_type "llama3", factor 4, low/high frequency factors 1 and 4,
original context 8 tokens, so it changes the angles of a 16-token sequence); the script checks
that the scaling changes transformers' loss, so the test that uses it can fail.
llama32: Llama 3.2 as it ships (1B, 3B): llama3's attention and scaling with tied input and output
embeddings (tie_word_embeddings: save_pretrained writes no lm_head.weight; the embedding's gradient
is the sum over both uses); the script checks that untying the same weights changes the loss.
llama_head_dim: a head_dim given explicitly and not hidden / heads (16 for hidden 32 and 4 heads, as
Mistral NeMo's 128 for 5120 / 32): q_proj [64, 32], o_proj [32, 64], k_proj and v_proj [2 x 16, 32].
mistral: MistralForCausalLM (model_type "mistral"): grouped-query attention, rotary base 1e6, a
sliding window (4096) longer than the sequence.
mistral_window: the same with a sliding window of 4 tokens, which cuts the 16-token sequences (the
script checks that the window changes transformers' loss).
qwen2: Qwen2ForCausalLM: biases on q_proj, k_proj, v_proj (random, like the weights), GQA, rotary
base 1e6.
qwen2_window: the same with use_sliding_window, a window of 4 tokens and max_window_layers 0 (every
layer's attention windowed; transformers writes it as layer_types).
"""
import copy
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from pipecoord.synthetic_data import SyntheticData  # noqa: E402

# hf_transformers_test.cc's job: seed 5, 4 micro-batches of 2 samples of 16 tokens.
SEED, MICROBATCHES, MBS, SEQ = 5, 4, 2, 16


def make(rope, kv_heads, family="llama", window=4096, tied=False, head_dim=None):
    extra = {} if head_dim is None else {"head_dim": head_dim}
    shape = dict(**extra, vocab_size=64, hidden_size=32, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=kv_heads, max_position_embeddings=SEQ, rms_norm_eps=1e-5, rope_parameters=rope,
                 tie_word_embeddings=tied)
    if family == "mistral":  # its sliding window (4096) is longer than the sequence: it never cuts
        config = transformers.MistralConfig(sliding_window=window, **shape)
        cls = transformers.MistralForCausalLM
    elif family == "qwen2":  # biases on q, k, v; a sliding window only when one is asked for
        if window < SEQ:
            config = transformers.Qwen2Config(use_sliding_window=True, sliding_window=window, max_window_layers=0, **shape)
        else:
            config = transformers.Qwen2Config(use_sliding_window=False, **shape)
        cls = transformers.Qwen2ForCausalLM
    else:
        config = transformers.LlamaConfig(attention_bias=False, mlp_bias=False, **shape)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    model = cls(config).to(torch.float32).eval()
    with torch.no_grad():  # weights of a trained model's scale, not the init's tiny ones
        for p in model.parameters():
            p.normal_(0.0, 0.2) if p.dim() > 1 else p.uniform_(0.5, 1.5)
    return model


def loss(model, grads=False, logits_out=None):
    """Step 0's loss; with grads, its backward runs too (the weights' .grad hold d loss / d weight);
    logits_out (a dict): each micro-batch's logits under "mbN"."""
    data = SyntheticData(SEED, model.config.vocab_size, SEQ, MBS)
    losses = []
    with torch.set_grad_enabled(grads):
        for mb in range(MICROBATCHES):
            tokens, targets = data.batch(0, mb)
            logits = model(input_ids=tokens.long()).logits
            if logits_out is not None:
                logits_out["mb%d" % mb] = logits.detach().to(torch.float32).contiguous()
            mb_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                        targets.long().reshape(-1))
            if grads:
                (mb_loss / MICROBATCHES).backward()
            losses.append(mb_loss.item())
    return sum(losses) / len(losses)


def main():
    out = sys.argv[1]
    default = {"rope_type": "default", "rope_theta": 500000.0}
    rope = default
    tied = sys.argv[2:] == ["llama32"]
    head_dim = 16 if sys.argv[2:] == ["llama_head_dim"] else None
    if sys.argv[2:] in (["llama3"], ["llama32"]):
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
    family = sys.argv[2] if sys.argv[2:] in (["mistral"], ["qwen2"]) else "llama"
    window = 4096  # longer than the sequence: it never cuts
    if sys.argv[2:] in (["mistral_window"], ["qwen2_window"]):
        family, window = sys.argv[2].split("_")[0], 4
    if family != "llama":
        rope = {"rope_type": "default", "rope_theta": 1000000.0}  # Mistral 7B v0.2's and Qwen2's base
    kv_heads = 2 if rope is not default or head_dim else 4
    model = make(rope, kv_heads, family, window, tied, head_dim)
    if head_dim:
        attn = model.model.layers[0].self_attn
        assert tuple(attn.q_proj.weight.shape) == (64, 32) and tuple(attn.o_proj.weight.shape) == (32, 64)
    if tied:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    # 3 shards (the BUILD file names them): the first shard size that gives 3.
    for kb in range(80, 20, -1):
        model.save_pretrained(out, max_shard_size="%dKB" % kb, safe_serialization=True)
        if os.path.exists(os.path.join(out, "model-00003-of-00003.safetensors")):
            break
        for f in os.listdir(out):
            if f.startswith("model") and f.endswith((".safetensors", ".json")):
                os.remove(os.path.join(out, f))
    else:
        raise SystemExit("no shard size gives 3 shards")
    logits = {}
    got = loss(model, logits_out=logits)
    os.makedirs(os.path.join(out, "logits"), exist_ok=True)
    safetensors.torch.save_file(logits, os.path.join(out, "logits", "model.safetensors"))
    # The gradients from the same weights in float64, rounded once to float32: transformers' own
    # float32 backward is 9.4e-6 off them on the windowed Qwen2's nearly cancelling k bias, so it
    # would judge our float32 by its own rounding.
    exact = copy.deepcopy(model).to(torch.float64)
    loss(exact, grads=True)
    os.makedirs(os.path.join(out, "grads"), exist_ok=True)
    safetensors.torch.save_file({name: p.grad.to(torch.float32).contiguous() for name, p in exact.named_parameters()},
                                os.path.join(out, "grads", "model.safetensors"))
    if window < SEQ:
        whole = loss(make(rope, kv_heads, family))  # the same weights, a window longer than the sequence
        assert abs(got - whole) > 1e-4 * got, (got, whole)
    if tied:  # the same weights with a head of its own, started from another draw: another loss
        untied = make(rope, kv_heads)
        assert abs(got - loss(untied)) > 1e-4 * got, (got, loss(untied))
    if rope.get("rope_type") == "llama3":
        unscaled = loss(make(default, kv_heads, tied=tied))  # the same weights (the same seed) without the scaling
        assert abs(got - unscaled) > 1e-4 * got, (got, unscaled)
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write("%.10f\n" % got)


if __name__ == "__main__":
    main()
