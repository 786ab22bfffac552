#!/usr/bin/env python3
"""A tiny Llama checkpoint written by Hugging Face transformers itself (LlamaForCausalLM with random
weights, save_pretrained in shards with its model.safetensors.index.json), and transformers' own
loss of it on step 0's micro-batches of the job hf_transformers_test runs (pipecoord's synthetic
token stream, python/pipecoord/synthetic_data.py, the C++ stream bit for bit).

    write_transformers_llama.py OUT_DIR [llama3]  -> OUT_DIR/{config.json, model-*.safetensors,
                                                     model.safetensors.index.json, loss.txt}
llama3: the config carries Llama 3's rotary scaling (rope_type "llama3", factor 4, low/high
frequency factors 1 and 4, original context 8 tokens, so it changes the angles of a 16-token
sequence); the script checks the scaling changes transformers' loss, so the test that uses it can
fail.
"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
import transformers  # noqa: E402

from pipecoord.synthetic_data import SyntheticData  # noqa: E402

# hf_transformers_test.cc's job: seed 5, 4 micro-batches of 2 samples of 16 tokens.
SEED, MICROBATCHES, MBS, SEQ = 5, 4, 2, 16


def make(rope):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=SEQ,
                                      rms_norm_eps=1e-5, rope_parameters=rope, tie_word_embeddings=False,
                                      attention_bias=False, mlp_bias=False)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():  # weights of a trained model's scale, not the init's tiny ones
        for p in model.parameters():
            p.normal_(0.0, 0.2) if p.dim() > 1 else p.uniform_(0.5, 1.5)
    return model


def loss(model):
    data = SyntheticData(SEED, model.config.vocab_size, SEQ, MBS)
    losses = []
    with torch.no_grad():
        for mb in range(MICROBATCHES):
            tokens, targets = data.batch(0, mb)
            logits = model(input_ids=tokens.long()).logits
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                            targets.long().reshape(-1)).item())
    return sum(losses) / len(losses)


def main():
    out = sys.argv[1]
    default = {"rope_type": "default", "rope_theta": 500000.0}
    rope = default
    if sys.argv[2:] == ["llama3"]:
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8}
    model = make(rope)
    model.save_pretrained(out, max_shard_size="60KB", safe_serialization=True)
    got = loss(model)
    if rope is not default:
        unscaled = loss(make(default))  # the same weights (the same seed) without the scaling
        assert abs(got - unscaled) > 1e-4 * got, (got, unscaled)
    with open(os.path.join(out, "loss.txt"), "w") as f:
        f.write("%.10f\n" % got)


if __name__ == "__main__":
    main()
