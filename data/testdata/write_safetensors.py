#!/usr/bin/python3
"""Writes a safetensors file with Python's standard library alone (struct, json), for
data/safetensors_file_test: an independent writer that shares no code with ours.

    write_safetensors.py OUT.safetensors

The tensors (the test expects exactly these values):
  model.embed_tokens.weight  F32  [3, 4]  (i - 5) * 0.375 for i = 0..11
  model.norm.weight          BF16 [5]     1.0, -2.5, 0.15625, 65280.0, -0.0 (exact in bf16)
  lm_head.bias               F16  [2]     1.5, -0.25
  positions                  I32  [4]     -3, 0, 7, 2147483647
  step                       I64  []      42 (a scalar)
  empty                      F32  [0, 3]  no data
and __metadata__ {"format": "pt", "source": "python struct+json"}. The header is json.dumps'
default spacing, its entries in name order, padded with spaces to a multiple of 8 as the
reference writer does; the data follows the same order.
"""
import json
import struct
import sys


def bf16(values):
    # The high half of each float32: exact for these values.
    return b"".join(struct.pack("<f", v)[2:4] for v in values)


TENSORS = {
    "model.embed_tokens.weight": ("F32", [3, 4], struct.pack("<12f", *[(i - 5) * 0.375 for i in range(12)])),
    "model.norm.weight": ("BF16", [5], bf16([1.0, -2.5, 0.15625, 65280.0, -0.0])),
    "lm_head.bias": ("F16", [2], struct.pack("<2e", 1.5, -0.25)),
    "positions": ("I32", [4], struct.pack("<4i", -3, 0, 7, 2147483647)),
    "step": ("I64", [], struct.pack("<q", 42)),
    "empty": ("F32", [0, 3], b""),
}


def main():
    header, data = {"__metadata__": {"format": "pt", "source": "python struct+json"}}, b""
    for name in sorted(TENSORS):
        dtype, shape, raw = TENSORS[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    main()
