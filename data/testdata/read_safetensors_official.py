#!/usr/bin/env python3
"""Reads a safetensors file with the official safetensors package (safe_open, framework "pt") and
prints it as read_safetensors.py does, for data/safetensors_file_test's check that the files we
write read with what PyTorch and transformers users read them with:

    read_safetensors_official.py FILE
    NAME DTYPE [SHAPE] v1 v2 ...       one line per tensor, by name; floats as float.hex()
    __metadata__ KEY=VALUE ...         when present
"""
import json
import sys

import torch
from safetensors import safe_open

DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.int32: "I32",
          torch.int64: "I64", torch.uint8: "U8", torch.int8: "I8", torch.float64: "F64"}


def main():
    with safe_open(sys.argv[1], framework="pt") as f:
        for name in sorted(f.keys()):
            t = f.get_tensor(name)
            values = t.reshape(-1).tolist() if t.dtype not in (torch.bfloat16, torch.float16) else \
                t.float().reshape(-1).tolist()
            text = [v.hex() if isinstance(v, float) else str(v) for v in values]
            print(name, DTYPES[t.dtype], json.dumps(list(t.shape)), *text)
        metadata = f.metadata()
        if metadata is not None:
            print("__metadata__", *("%s=%s" % kv for kv in sorted(metadata.items())))


if __name__ == "__main__":
    main()
