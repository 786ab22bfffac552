"""Text to a token dataset with a Hugging Face tokenizer: what `pipectl data prepare --tokenizer`
runs (it hands its arguments to `python -m pipecoord.data_prepare`).

    python -m pipecoord.data_prepare TEXT... --tokenizer tokenizer.json --out DIR
                                     [--val-fraction F] [--format text|json]

The tokenizer is a `tokenizer.json` as Hugging Face publishes it beside a model (Llama 3's, Mistral's,
Qwen2's, GPT-2's: BPE, Unigram or WordPiece), read and run by the `tokenizers` package itself. The
output is the flat format pipectl data prepare writes for bytes (data/flat_sidecar.h): DIR/train.bin
and DIR/val.bin hold the ids back to back (little-endian uint16 when the vocabulary fits in 65536,
else uint32), DIR/train.json and DIR/val.json their sidecars (dtype, vocab_size, tokens,
document_starts, tokenizer). Each file is one document, encoded on its own without special tokens
(no BOS/EOS added: the model sees the document boundaries in document_starts), in the order given;
validation is the tail, the last round(F x tokens) tokens. The vocabulary size written is the
tokenizer's with its added tokens, so a job's model.vocab must be at least that (pipectl submit
checks every id). Files are written under temporary names and renamed, the sidecars last, so a
reader never takes a half-written dataset for a finished one.

Errors name the file and the rule (an unreadable input, text that is not UTF-8, a tokenizer file
`tokenizers` cannot read, too few tokens for a split) and exit with 2; a missing `tokenizers`
package says how to install it.
"""
import argparse
import json
import os
import sys

import numpy as np

_UINT16_VOCAB = 65536


def _write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def _split(out_dir, name, ids, starts, dtype, vocab, tokenizer_name):
    """Writes OUT/NAME.bin, then OUT/NAME.json; returns the split's report."""
    bin_path, sidecar_path = os.path.join(out_dir, name + ".bin"), os.path.join(out_dir, name + ".json")
    _write(bin_path, np.asarray(ids, dtype="<u2" if dtype == "uint16" else "<u4").tobytes())
    sidecar = {"dtype": dtype, "vocab_size": vocab, "tokens": len(ids), "document_starts": starts,
               "tokenizer": tokenizer_name}
    _write(sidecar_path, (json.dumps(sidecar) + "\n").encode())
    return {"bin": bin_path, "sidecar": sidecar_path, "tokens": len(ids), "documents": len(starts)}


def prepare(inputs, tokenizer_path, out_dir, val_fraction=0.1, progress=None):
    """Tokenizes `inputs` (paths) into OUT_DIR; returns the report (what --format json prints).
    Raises ValueError naming the file and the rule; ImportError without `tokenizers`."""
    if not inputs:
        raise ValueError("needs at least one TEXT file")
    if not 0 <= val_fraction < 1:
        raise ValueError(f"--val-fraction: must be in [0, 1), got {val_fraction}")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ImportError("--tokenizer needs the `tokenizers` package (pip install tokenizers; "
                          "tools/requirements.txt pins the tested version)") from None
    try:
        tokenizer = Tokenizer.from_file(tokenizer_path)
    except Exception as e:  # noqa: BLE001 (tokenizers raises its own Exception types)
        raise ValueError(f"{tokenizer_path}: not a tokenizer.json the tokenizers package reads: {e}") from None
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    ids, starts, total_bytes = [], [], 0
    for n, path in enumerate(inputs):
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ValueError(f"cannot open {path}: {e.strerror}") from None
        total_bytes += len(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text (byte {e.start}); the byte-level pipectl data prepare "
                             "takes any bytes") from None
        encoded = tokenizer.encode(text, add_special_tokens=False).ids if text else []
        if encoded:  # an empty document adds none
            starts.append(len(ids))
            ids.extend(encoded)
        if progress:
            progress(n + 1, len(inputs))
    if not ids:
        raise ValueError("the inputs hold no text")
    if max(ids) >= vocab:  # the tokenizers package never does this; checked, not assumed
        raise ValueError(f"{tokenizer_path}: produced id {max(ids)} outside its vocabulary of {vocab}")
    total = len(ids)
    held = round(val_fraction * total)
    if held and (held < 2 or total - held < 2):
        raise ValueError(f"--val-fraction {val_fraction} of {total} tokens leaves {total - held} for training and "
                         f"{held} for validation: each split needs 2 (a token and its successor)")
    if not held and total < 2:
        raise ValueError(f"the inputs hold {total} token: training needs 2 (a token and its successor)")
    dtype = "uint16" if vocab <= _UINT16_VOCAB else "uint32"
    name = "tokenizers:" + os.path.basename(tokenizer_path)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--out: cannot create {out_dir}: {e.strerror}") from None
    cut = total - held
    report = {"tokenizer": name, "vocab_size": vocab, "dtype": dtype, "input_files": len(inputs),
              "input_bytes": total_bytes, "val_fraction": val_fraction,
              "train": _split(out_dir, "train", ids[:cut], [s for s in starts if s < cut], dtype, vocab, name),
              "val": None}
    if held:
        val_starts = [0] + [s - cut for s in starts if s > cut]
        report["val"] = _split(out_dir, "val", ids[cut:], val_starts, dtype, vocab, name)
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pipectl data prepare --tokenizer",
                                     description="Text files to the flat token format with a Hugging Face "
                                                 "tokenizer.json (the tokenizers package).")
    parser.add_argument("inputs", nargs="+", metavar="TEXT")
    parser.add_argument("--tokenizer", required=True, help="a tokenizer.json")
    parser.add_argument("--out", required=True, help="the folder to write (created if missing)")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)

    def progress(done, total):
        if total >= 10 and done * 10 // total != (done - 1) * 10 // total:
            print(f"pipectl data prepare: {done * 100 // total}% ({done} of {total} files)", file=sys.stderr)
    try:
        report = prepare(args.inputs, args.tokenizer, args.out, args.val_fraction, progress)
    except (ValueError, ImportError) as e:
        print(f"pipectl data prepare: {e}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
        return 0
    for name in ("train", "val"):
        s = report[name]
        if s:
            print(f"{name + ':':7}{s['bin']} ({s['tokens']} tokens, {s['documents']} documents), {s['sidecar']}")
    print(f"from {report['input_files']} files, {report['input_bytes']} bytes; {report['tokenizer']} tokens "
          f"(vocabulary {report['vocab_size']}) as {report['dtype']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
