#!/usr/bin/python3
"""Reads a safetensors file with Python's standard library alone (struct, json) and prints
each tensor, for data/safetensors_file_test's check that files we write read back outside our
code:

    read_safetensors.py FILE
    NAME DTYPE [SHAPE] v1 v2 ...       one line per tensor, by name; floats as float.hex()
    __metadata__ KEY=VALUE ...         when present

It checks the layout as it goes (the header length, offsets tiling the data) and exits 1 on
any violation.
"""
import json
import struct
import sys

FORMATS = {"F32": "f", "F16": "e", "I32": "i", "I64": "q", "U8": "B", "I8": "b", "F64": "d"}


def main():
    raw = open(sys.argv[1], "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    if (8 + n) % 8:
        sys.exit("the data buffer does not start at a multiple of 8")
    metadata = header.pop("__metadata__", None)
    spans = sorted((info["data_offsets"], name) for name, info in header.items())
    end = 0
    for (b, e), name in spans:
        if b != end:
            sys.exit("tensor %s does not start where the one before ends" % name)
        end = e
    if end != len(data):
        sys.exit("the tensors do not cover the data buffer")
    for name in sorted(header):
        info = header[name]
        b, e = info["data_offsets"]
        chunk = data[b:e]
        if info["dtype"] == "BF16":
            values = [struct.unpack("<f", b"\0\0" + chunk[i:i + 2])[0] for i in range(0, len(chunk), 2)]
        else:
            fmt = FORMATS[info["dtype"]]
            values = list(struct.unpack("<%d%s" % (len(chunk) // struct.calcsize(fmt), fmt), chunk))
        text = [v.hex() if isinstance(v, float) else str(v) for v in values]
        print(name, info["dtype"], json.dumps(info["shape"]), *text)
    if metadata is not None:
        print("__metadata__", *("%s=%s" % kv for kv in sorted(metadata.items())))


if __name__ == "__main__":
    main()
