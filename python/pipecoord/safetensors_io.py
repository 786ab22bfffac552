"""Reads and writes safetensors files (Hugging Face's format: an 8-byte little-endian header
length, a JSON header {name: {dtype, shape, data_offsets}}, the data buffer) as torch tensors,
with the standard library and torch alone: the files pipecoord's workers and tools write
(data/safetensors_file.h) and the ones PyTorch-side code hands them.

    tensors = read_safetensors("weights.safetensors")     # {name: torch.Tensor}, in file order
    meta = read_metadata("weights.safetensors")           # {key: value}, {} when there is none
    write_safetensors("out.safetensors", {"w": torch.zeros(2, 3)})
"""
import json
import struct

import torch

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def read_safetensors(path):
    """{name: tensor} (copies, in data-offset order); __metadata__ is dropped. Raises ValueError
    naming the tensor on a layout the format forbids."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError("%s: tensor %r has dtype %s, which this reader does not know" %
                             (path, name, info["dtype"]))
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError("%s: tensor %r lies outside the data buffer" % (path, name))
        chunk = bytearray(data[begin:end])
        t = torch.frombuffer(chunk, dtype=dtype) if chunk else torch.empty(0, dtype=dtype)
        shape = info["shape"]
        if t.numel() != (1 if not shape else int(torch.tensor(shape).prod())):
            raise ValueError("%s: tensor %r holds %d elements, its shape %s says otherwise" %
                             (path, name, t.numel(), shape))
        out[name] = t.reshape(shape)
    return out


def read_metadata(path):
    """The header's __metadata__ ({str: str}), {} when absent."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n).decode("utf-8")).get("__metadata__", {})


def encode_safetensors(tensors):
    """(header, data): the JSON header's tensor entries for {name: tensor} (names in the given
    order) and the data buffer they point into (contiguous little-endian copies)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        # reshape(-1): a 0-dimensional tensor (a scalar buffer) cannot be viewed as bytes itself.
        blob = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    return header, b"".join(blobs)


def header_bytes(header, metadata=None):
    """The 8-byte length and the JSON header (with __metadata__), padded to 8 bytes."""
    header = dict(header)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} (contiguous little-endian copies), names in the given order."""
    header, data = encode_safetensors(tensors)
    with open(path, "wb") as f:
        f.write(header_bytes(header, metadata))
        f.write(data)
