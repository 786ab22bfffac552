"""The C++ worker's token datasets, read the same way, so a PyTorch worker trains on spec.data with
exactly the sequences a C++ worker of the same rank would read.

A port of (each function names its C++ original; tests/torch_data checks them against it):
- data/index_permutation.h: Mix64 and IndexPermutation (a keyed Feistel bijection of [0, n)
  with cycle walking), the shuffled order of each epoch.
- data/sequence_sampler.h: SplitTail (the validation tail), SequenceSampler (window w starts at
  begin + w s; sequence n of the run reads window P_e(n mod E G) of epoch e = n / (E G)).
- data/token_dataset.h: the flat format (PREFIX.bin + PREFIX.json, what `pipectl data prepare`
  writes) and Megatron-LM's PREFIX.bin + PREFIX.idx, memory-mapped with numpy.
- data/job_data.h: a job's spec.data: PREFIX or a prepared FOLDER (FOLDER/train), less the
  valFraction tail, in a shuffled order per epoch; with spec.evalEvery, the validation split
  (spec.data.valPath, else the valFraction tail, else the folder's val) read in order, evalBatches
  micro-batches per replica, the same at every evaluation.
"""
import json
import math
import os
import struct

import numpy as np
import torch

from pipecoord.synthetic_data import SyntheticData
from pipecoord.synthetic_data import mix64 as _splitmix_finaliser

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(x):
    """data/index_permutation.h Mix64: SplitMix64 (the golden-ratio add, then the finaliser)."""
    return _splitmix_finaliser((x + _GOLDEN) & _M64)


class IndexPermutation:
    """data/index_permutation.h: a pseudo-random bijection of [0, n), n >= 1, index by index."""

    def __init__(self, n, key):
        if n < 1:
            raise ValueError(f"IndexPermutation: n must be >= 1, got {n}")
        self.n, self.key = n, mix64(key & _M64)
        bits = 2
        while bits < 64 and (1 << bits) < n:
            bits += 2
        self.half_bits = bits // 2
        self.half_mask = (1 << self.half_bits) - 1

    def _feistel(self, x):
        left, right = x >> self.half_bits, x & self.half_mask
        for r in range(6):
            f = mix64(self.key ^ mix64(((r << 56) & _M64) ^ right)) & self.half_mask
            left, right = right, left ^ f
        return (left << self.half_bits) | right

    def __call__(self, i):
        x = self._feistel(i)
        while x >= self.n:
            x = self._feistel(x)
        return x


def _llround(x):
    """std::llround for x >= 0: halves away from zero (Python's round() rounds them to even)."""
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


def split_tail(tokens, val_fraction):
    """data/sequence_sampler.h SplitTail: ((0, cut), (cut, tokens)), the tail round(f x tokens)."""
    if not (0 <= val_fraction < 1):
        raise ValueError(f"validation fraction must be in [0, 1), got {val_fraction}")
    val = _llround(val_fraction * float(tokens))
    cut = tokens - min(val, tokens)
    return (0, cut), (cut, tokens)


class SequenceSampler:
    """data/sequence_sampler.h SequenceSampler over the token range [begin, end)."""

    SHUFFLED, SEQUENTIAL = "shuffled", "sequential"

    def __init__(self, token_range, seed, seq_len, micro_batch_size, microbatches, dp, order=SHUFFLED):
        for name, v in (("seq_len", seq_len), ("micro_batch_size", micro_batch_size),
                        ("microbatches", microbatches), ("dp", dp)):
            if v < 1:
                raise ValueError(f"sampling: {name} must be >= 1, got {v}")
        begin, end = token_range
        if end < begin:
            raise ValueError(f"sampling: the range [{begin}, {end}) ends before it begins")
        self.begin, self.end = begin, end
        self.seed, self.seq_len, self.b, self.m, self.dp, self.order = seed, seq_len, micro_batch_size, microbatches, dp, order
        size = end - begin
        self.windows = 0 if size < 2 else (size - 1) // seq_len
        self.per_step = dp * microbatches * micro_batch_size
        if self.windows < self.per_step:
            raise ValueError(f"sampling: the range of {size} tokens holds {self.windows} windows of {seq_len + 1} "
                             f"tokens, fewer than one step's {self.per_step} sequences (dp {dp} x {microbatches} "
                             f"micro-batches x {micro_batch_size})")
        self.steps_per_epoch = self.windows // self.per_step
        self.per_epoch = self.steps_per_epoch * self.per_step
        self._epoch_orders = {}

    def _permutation(self, epoch):
        p = self._epoch_orders.get(epoch)
        if p is None:
            p = IndexPermutation(self.windows, mix64(self.seed & _M64) ^ mix64(epoch ^ 0x5EED5A3B1E000000))
            self._epoch_orders = {epoch: p}  # steps walk the epochs in order: keep the latest
        return p

    def sequence_start(self, n):
        """The stream offset of the window sequence number n reads."""
        epoch, position = divmod(n, self.per_epoch)
        window = self._permutation(epoch)(position) if self.order == self.SHUFFLED else position
        return self.begin + window * self.seq_len

    def microbatch_starts(self, step, replica, microbatch):
        """The first token's offset of each of the b sequences `replica` reads in `microbatch`
        of `step`."""
        if step < 0:
            raise ValueError(f"sampling: step must be >= 0, got {step}")
        if not 0 <= replica < self.dp:
            raise ValueError(f"sampling: replica {replica} is outside [0, {self.dp})")
        if not 0 <= microbatch < self.m:
            raise ValueError(f"sampling: micro-batch {microbatch} is outside [0, {self.m})")
        if step > (_M64 - self.per_step) // self.per_step:
            raise ValueError(f"sampling: step {step} is too large to number its sequences")
        first = step * self.per_step + (replica * self.m + microbatch) * self.b
        return [self.sequence_start(first + row) for row in range(self.b)]


# Megatron-LM's dtype codes (data/megatron_index.h); 6 and 7 (floats) are refused.
_MEGATRON_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}
_FLAT_DTYPES = {"uint16": np.uint16, "uint32": np.uint32}
_SIDECAR_KEYS = {"dtype", "vocab_size", "tokens", "document_starts", "tokenizer"}


class TokenDataset:
    """data/token_dataset.h: PREFIX.bin with PREFIX.json (flat) or PREFIX.idx (Megatron-LM),
    memory-mapped; `tokens` is a 1-D numpy array of the ids. Errors (ValueError) name the file
    and the rule. vocab_size: the model's; every id must be below it."""

    def __init__(self, prefix, vocab_size, check_tokens=True):
        if prefix.endswith(".bin"):
            prefix = prefix[:-4]
        bin_path, json_path, idx_path = prefix + ".bin", prefix + ".json", prefix + ".idx"
        flat, megatron = os.path.exists(json_path), os.path.exists(idx_path)
        if flat and megatron:
            raise ValueError(f"{prefix}: both {json_path} (flat) and {idx_path} (Megatron-LM) exist; keep the one "
                             f"that describes {bin_path}")
        if not flat and not megatron:
            raise ValueError(f"{prefix}: no dataset: neither {json_path} (flat token sidecar) nor {idx_path} "
                             f"(Megatron-LM index) exists")
        if not os.path.exists(bin_path):
            raise ValueError(f"{bin_path}: no such file")
        self.bin_path, self.format = bin_path, "flat" if flat else "megatron"
        bin_size = os.path.getsize(bin_path)
        if flat:
            dtype, self.vocab_size = self._read_sidecar(json_path, bin_path, bin_size, vocab_size)
            vocab_source = f"{json_path}'s vocab_size"
        else:
            dtype = self._read_index(idx_path, bin_path, bin_size)
            if vocab_size <= 0:
                raise ValueError(f"{idx_path}: a Megatron-LM index records no vocabulary size; give the model's")
            self.vocab_size = vocab_size
            vocab_source = "the model's vocabulary"
        count = bin_size // np.dtype(dtype).itemsize
        self.tokens = (np.memmap(bin_path, dtype=np.dtype(dtype).newbyteorder("<"), mode="r", shape=(count,))
                       if count else np.zeros(0, dtype=dtype))
        if check_tokens and count:
            lo, hi = int(self.tokens.min()), int(self.tokens.max())
            if lo < 0 or hi >= self.vocab_size:
                bad = int(np.flatnonzero((self.tokens < 0) | (self.tokens >= self.vocab_size))[0])
                raise ValueError(f"{bin_path}: token {int(self.tokens[bad])} at offset {bad} is outside "
                                 f"[0, {self.vocab_size}) ({vocab_source})")

    @staticmethod
    def _read_sidecar(json_path, bin_path, bin_size, model_vocab):
        with open(json_path, encoding="utf-8") as f:
            try:
                side = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{json_path}: not JSON: {e}") from None
        if not isinstance(side, dict):
            raise ValueError(f"{json_path}: expected a JSON object")
        unknown = sorted(set(side) - _SIDECAR_KEYS)
        if unknown:
            raise ValueError(f"{json_path}: unknown key \"{unknown[0]}\"")
        dtype = _FLAT_DTYPES.get(side.get("dtype"))
        if dtype is None:
            raise ValueError(f"{json_path}: dtype: expected \"uint16\" or \"uint32\", got {side.get('dtype')!r}")
        vocab = side.get("vocab_size")
        if not isinstance(vocab, int) or vocab < 1:
            raise ValueError(f"{json_path}: vocab_size: required, a positive integer, got {vocab!r}")
        width = np.dtype(dtype).itemsize
        if bin_size % width:
            raise ValueError(f"{bin_path}: {bin_size} bytes is not a whole number of {side['dtype']} tokens")
        if "tokens" in side and side["tokens"] != bin_size // width:
            raise ValueError(f"{json_path}: tokens is {side['tokens']}, but {bin_path} holds {bin_size // width}")
        if model_vocab > 0 and vocab > model_vocab:
            raise ValueError(f"{json_path}: vocab_size {vocab} is larger than the model's vocabulary ({model_vocab})")
        return dtype, vocab

    @staticmethod
    def _read_index(idx_path, bin_path, bin_size):
        with open(idx_path, "rb") as f:
            raw = f.read()
        if len(raw) < 34 or raw[:9] != b"MMIDIDX\x00\x00":
            raise ValueError(f"{idx_path}: not a Megatron-LM index (no MMIDIDX header)")
        version, code, sequences, doc_entries = struct.unpack_from("<QBQQ", raw, 9)
        if version != 1:
            raise ValueError(f"{idx_path}: version {version}, expected 1")
        dtype = _MEGATRON_DTYPES.get(code)
        if dtype is None:
            raise ValueError(f"{idx_path}: dtype code {code} is not an integer token type")
        if len(raw) != 34 + 12 * sequences + 8 * doc_entries:
            raise ValueError(f"{idx_path}: {len(raw)} bytes, expected {34 + 12 * sequences + 8 * doc_entries} for "
                             f"{sequences} sequences and {doc_entries} document entries")
        lengths = np.frombuffer(raw, dtype="<i4", count=sequences, offset=34).astype(np.int64)
        offsets = np.frombuffer(raw, dtype="<i8", count=sequences, offset=34 + 4 * sequences)
        width = np.dtype(dtype).itemsize
        expected = np.concatenate([[0], np.cumsum(lengths)[:-1]]) * width if sequences else offsets
        if (lengths < 0).any() or not np.array_equal(offsets, expected):
            raise ValueError(f"{idx_path}: sequences are not stored back to back from byte 0")
        if bin_size != int(lengths.sum()) * width:
            raise ValueError(f"{bin_path}: {bin_size} bytes, but {idx_path}'s sequences hold "
                             f"{int(lengths.sum()) * width}")
        return dtype


class DatasetBatches:
    """A job's spec.data as the torch executor reads it: batch(step, global_mb) is replica
    global_mb // m's micro-batch global_mb % m (the executor's dp_rank * m + mb, as the C++
    TrainingData numbers them), its b sequences as int64 tensors [b, seq_len] (inputs, targets)."""

    def __init__(self, spec):
        d = spec.data
        if d.format not in ("", "flat", "megatron"):
            raise ValueError(f"spec.data.format: must be \"flat\", \"megatron\" or empty, got \"{d.format}\"")
        prefix = d.path
        if os.path.isdir(prefix):
            prefix = os.path.join(prefix, "train")
        self.dataset = TokenDataset(prefix, spec.model.vocab)
        if d.format and d.format != self.dataset.format:
            raise ValueError(f"spec.data.path: spec.data.format is \"{d.format}\", but {prefix} is "
                             f"{self.dataset.format}")
        train, tail = split_tail(len(self.dataset.tokens), d.val_fraction)
        self.m = spec.microbatches
        seed, dp = spec.data_seed or spec.model.seed, max(1, spec.dp)
        self.sampler = SequenceSampler(train, seed, spec.model.seq_len, spec.micro_batch_size, spec.microbatches, dp)
        # Validation (JobData::Open): valPath, else the valFraction tail, else a prepared folder's val.
        self.val_tokens = self.val_sampler = None
        self.eval_batches = max(1, spec.eval_batches) if spec.eval_every > 0 else 0
        if not self.eval_batches:
            return
        val_prefix = d.val_path
        if not val_prefix and d.val_fraction == 0 and os.path.isdir(d.path) and \
                os.path.exists(os.path.join(d.path, "val.bin")):
            val_prefix = os.path.join(d.path, "val")
        if val_prefix:
            val = TokenDataset(val_prefix, spec.model.vocab)
            if d.format and d.format != val.format:
                raise ValueError(f"spec.data.valPath: spec.data.format is \"{d.format}\", but {val_prefix} is "
                                 f"{val.format}")
            self.val_tokens, val_range = val.tokens, (0, len(val.tokens))
        elif d.val_fraction > 0:
            self.val_tokens, val_range = self.dataset.tokens, tail
        else:
            raise ValueError(f"spec.evalEvery: validation needs a split: spec.data.valPath, spec.data.valFraction, "
                             f"or a folder from pipectl data prepare holding val.bin ({d.path} has none)")
        self.val_sampler = SequenceSampler(val_range, seed, spec.model.seq_len, spec.micro_batch_size,
                                           self.eval_batches, dp, SequenceSampler.SEQUENTIAL)

    def batch(self, step, global_mb):
        replica, mb = divmod(global_mb, self.m)
        return read_sequences(self.dataset.tokens, self.sampler.microbatch_starts(step, replica, mb),
                              self.sampler.seq_len)

    def validation(self, replica, k):
        """JobData::Validation: validation micro-batch k (< evalBatches) of `replica`, (inputs,
        targets) as batch() returns them; the same at every evaluation."""
        if self.val_sampler is None:
            raise ValueError("validation: the job's data has no validation split (spec.evalEvery is 0)")
        return read_sequences(self.val_tokens, self.val_sampler.microbatch_starts(0, replica, k),
                              self.val_sampler.seq_len)


def read_sequences(tokens, starts, seq_len):
    """data/sequence_sampler.h ReadSequences: (inputs, targets) int64 [len(starts), seq_len]."""
    rows = np.stack([np.asarray(tokens[s:s + seq_len + 1], dtype=np.int64) for s in starts])
    return torch.from_numpy(rows[:, :-1].copy()), torch.from_numpy(rows[:, 1:].copy())


def training_data(spec):
    """What a rank reads: the job's dataset when spec.data is set, else the synthetic stream."""
    if spec.HasField("data"):
        return DatasetBatches(spec)
    return SyntheticData(spec.data_seed or spec.model.seed, spec.model.vocab, spec.model.seq_len,
                         spec.micro_batch_size)
