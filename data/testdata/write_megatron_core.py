#!/usr/bin/env python3
"""Writes Megatron-LM indexed datasets with megatron-core's own writer
(megatron.core.datasets.indexed_dataset.IndexedDatasetBuilder, pinned in tools/requirements.txt),
for data/token_dataset_test: the same documents and tokens write_token_datasets.py writes by hand,
so our reader is checked against the library that defines the format.

    write_megatron_core.py OUT_DIR   -> OUT_DIR/megatron_u16.{bin,idx} (uint16, tokens (37 i + 11) % 1000)
                                        OUT_DIR/megatron_i32.{bin,idx} (int32, tokens (7919 i + 13) % 70000)
Documents (their sequences' lengths): [3, 2], [], [10, 7], [1], [30, 0].
"""
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")  # megatron-core's notes about Transformer Engine and Apex
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder  # noqa: E402

DOCUMENTS = [[3, 2], [], [10, 7], [1], [30, 0]]


def write(path, dtype, token):
    builder = IndexedDatasetBuilder(path + ".bin", dtype=dtype)
    offset = 0
    for doc in DOCUMENTS:
        n = sum(doc)
        builder.add_document(torch.tensor([token(offset + k) for k in range(n)], dtype=torch.int64), doc)
        offset += n
    builder.finalize(path + ".idx")


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "megatron_u16"), np.uint16, lambda i: (37 * i + 11) % 1000)
    write(os.path.join(out, "megatron_i32"), np.int32, lambda i: (7919 * i + 13) % 70000)


if __name__ == "__main__":
    main()
