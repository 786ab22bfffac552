#!/usr/bin/env python3
"""The loss of a Hugging Face Llama folder on given tokens, computed by Hugging Face transformers
itself: LlamaForCausalLM.from_pretrained(FOLDER) (its config.json and model.safetensors, or the
shards of model.safetensors.index.json, read by the official safetensors package), fp32, eager
attention, the mean next-token cross-entropy of its logits against the given targets. Shares no
code with pipecoord. transformers and safetensors are pinned in tools/requirements.txt.

    hf_llama_torch_loss.py FOLDER BATCH.json [CLASS [LOGITS.safetensors]]  -> prints the mean loss over the micro-batches
CLASS: the model class from_pretrained must give (default LlamaForCausalLM; MistralForCausalLM for
an export with a sliding window). LOGITS.safetensors: each micro-batch's logits written there
("mb0", ... [samples, tokens, vocab] F32, by the safetensors package).
BATCH.json: {"microbatches": [{"inputs": [[...], ...], "targets": [[...], ...]}, ...]} (ids per sample)
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder: nothing to fetch

import safetensors.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402


def main():
    folder, batch = sys.argv[1], json.load(open(sys.argv[2]))
    want = sys.argv[3] if len(sys.argv) > 3 else "LlamaForCausalLM"
    torch.set_num_threads(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    assert type(model).__name__ == want, (type(model), want)
    model.eval()
    losses, all_logits = [], {}
    with torch.no_grad():
        for k, mb in enumerate(batch["microbatches"]):
            logits = model(input_ids=torch.tensor(mb["inputs"], dtype=torch.long)).logits
            all_logits["mb%d" % k] = logits.to(torch.float32).contiguous()
            targets = torch.tensor(mb["targets"], dtype=torch.long)
            losses.append(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                            targets.reshape(-1)).item())
    if len(sys.argv) > 4:
        safetensors.torch.save_file(all_logits, sys.argv[4])
    print("%.10f" % (sum(losses) / len(losses)))
    print(f"transformers {transformers.__version__}: {type(model).__name__}", file=sys.stderr)


if __name__ == "__main__":
    main()
