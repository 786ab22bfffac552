#!/usr/bin/python3
"""Writes token datasets with Python's standard library alone (struct, json, array), as
nanoGPT-style trainers and Megatron-LM's builder lay them out, for data/token_dataset_test.

    write_token_datasets.py OUT_DIR

OUT_DIR/flat_u16.{bin,json}      1000 uint16 ids, id(i) = (37 i + 11) mod 1000, documents at 0, 400, 750
OUT_DIR/flat_u32.{bin,json}      300 uint32 ids, id(i) = (7919 i + 13) mod 100000 (ids above 65535)
OUT_DIR/megatron_u16.{bin,idx}   Megatron-LM indexed dataset, dtype code 8 (uint16), vocabulary 1000
OUT_DIR/megatron_i32.{bin,idx}   the same documents, dtype code 4 (int32), vocabulary 70000

The Megatron files hold five documents made of sequences of these lengths (one document is
empty, one sequence has no tokens): [3, 2], [], [10, 7], [1], [30, 0]; 53 tokens, documents
starting at tokens 0, 5, 22, 23 once the empty one is dropped. The token at offset i is
(37 i + 11) mod 1000 for uint16 and (7919 i + 13) mod 70000 for int32.
"""
import array
import json
import os
import struct
import sys

DOCUMENTS = [[3, 2], [], [10, 7], [1], [30, 0]]


def write_flat(path, typecode, dtype, vocab, ids, document_starts):
    arr = array.array(typecode, ids)
    assert arr.itemsize == {"H": 2, "I": 4}[typecode]
    if sys.byteorder != "little":
        arr.byteswap()
    with open(path + ".bin", "wb") as f:
        arr.tofile(f)
    with open(path + ".json", "w") as f:
        json.dump({"dtype": dtype, "vocab_size": vocab, "tokens": len(ids),
                   "document_starts": document_starts}, f, indent=2)


def write_megatron(path, code, fmt, token):
    itemsize = struct.calcsize("<" + fmt)
    lengths, pointers, doc_index = [], [], [0]
    offset = 0
    with open(path + ".bin", "wb") as f:
        for doc in DOCUMENTS:
            for n in doc:
                lengths.append(n)
                pointers.append(offset * itemsize)
                f.write(b"".join(struct.pack("<" + fmt, token(offset + k)) for k in range(n)))
                offset += n
            doc_index.append(len(lengths))
    with open(path + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)))
        f.write(struct.pack("<Q", len(doc_index)))
        f.write(struct.pack("<%di" % len(lengths), *lengths))
        f.write(struct.pack("<%dq" % len(pointers), *pointers))
        f.write(struct.pack("<%dq" % len(doc_index), *doc_index))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write_flat(os.path.join(out, "flat_u16"), "H", "uint16", 1000,
               [(37 * i + 11) % 1000 for i in range(1000)], [0, 400, 750])
    write_flat(os.path.join(out, "flat_u32"), "I", "uint32", 100000,
               [(7919 * i + 13) % 100000 for i in range(300)], [0])
    write_megatron(os.path.join(out, "megatron_u16"), 8, "H", lambda i: (37 * i + 11) % 1000)
    write_megatron(os.path.join(out, "megatron_i32"), 4, "i", lambda i: (7919 * i + 13) % 70000)


if __name__ == "__main__":
    main()
