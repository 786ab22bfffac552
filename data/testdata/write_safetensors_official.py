#!/usr/bin/env python3
"""Writes a safetensors file with the official safetensors package (safetensors.torch.save_file,
pinned in tools/requirements.txt), for data/safetensors_file_test: what transformers and PyTorch
users' files are written with.

    write_safetensors_official.py OUT.safetensors

The tensors (the test expects exactly these values):
  weight  F32  [2, 3]  (i - 2) * 0.5 for i = 0..5
  norm    BF16 [4]     1.0, -2.5, 0.15625, 65280.0 (exact in bf16)
  bias    F16  [2]     1.5, -0.25
  ids     I64  [3]     -3, 0, 2**40
and __metadata__ {"format": "pt", "source": "safetensors"}.
"""
import sys

import torch
from safetensors.torch import save_file


def main():
    tensors = {
        "weight": torch.tensor([(i - 2) * 0.5 for i in range(6)], dtype=torch.float32).reshape(2, 3),
        "norm": torch.tensor([1.0, -2.5, 0.15625, 65280.0], dtype=torch.bfloat16),
        "bias": torch.tensor([1.5, -0.25], dtype=torch.float16),
        "ids": torch.tensor([-3, 0, 2 ** 40], dtype=torch.int64),
    }
    save_file(tensors, sys.argv[1], metadata={"format": "pt", "source": "safetensors"})


if __name__ == "__main__":
    main()
