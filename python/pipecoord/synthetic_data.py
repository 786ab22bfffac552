"""The C++ worker's deterministic numbers, bit for bit, so a PyTorch worker trains on the same
token stream and answers the same numerical probes as the C++ daemon.

- Rng, mix64, split_mix64, fnv1a64, hash_string, combine_seeds: kernels/cpu/rng.h (SplitMix64, FNV-1a,
  xoshiro256** seeded from SplitMix64, Lemire's multiply-shift for below()).
- SyntheticData: worker/model/synthetic_data.h (a random successor permutation; each next token
  is the successor with probability 1 - noise, else uniform).
- probe_checksum: kernels/cpu/known_answer_gemm.h (Y = X W^T of seeded n x n integer inputs, exact
  in float32, and its sketch checksum).
"""
import struct

import torch

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def fnv1a64(data, h=0xCBF29CE484222325):
    """FNV-1a, 64 bit, over bytes (kernels/cpu/rng.h's HashString, data/rank_checkpoint.h's Fnv1a64)."""
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & _M64
    return h


def hash_string(s):
    return fnv1a64(s.encode("utf-8"))


def combine_seeds(a, b):
    return mix64((mix64(a & _M64) + _GOLDEN * ((b + 1) & _M64)) & _M64)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & _M64


class Rng:
    """xoshiro256**; a copy continues the stream."""

    def __init__(self, seed):
        st = seed & _M64
        self.s = []
        for _ in range(4):
            st = (st + _GOLDEN) & _M64
            self.s.append(mix64(st))

    def next(self):
        s = self.s
        result = (_rotl((s[1] * 5) & _M64, 7) * 9) & _M64
        t = (s[1] << 17) & _M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def uniform_double(self):
        """Uniform in [0, 1) with 53 random bits."""
        return (self.next() >> 11) * (2.0 ** -53)

    def below(self, n):
        """Uniform integer in [0, n)."""
        return ((self.next() >> 32) * n) >> 32


class SyntheticData:
    """worker/model/synthetic_data.h: batch(step, mb) is a pure function of (seed, step, mb)."""

    def __init__(self, seed, vocab, seq_len, micro_batch_size, noise=0.1):
        self.seed = combine_seeds(seed, hash_string("synthetic-data"))
        self.vocab, self.seq_len, self.micro_batch_size, self.noise = vocab, seq_len, micro_batch_size, noise
        successor = list(range(vocab))
        rng = Rng(combine_seeds(self.seed, hash_string("successor")))
        for i in range(vocab - 1, 0, -1):  # Fisher-Yates
            j = rng.below(i + 1)
            successor[i], successor[j] = successor[j], successor[i]
        self.successor = successor

    def batch(self, step, mb):
        """(inputs, targets): int64 tensors [micro_batch_size, seq_len]; targets are the inputs
        shifted by one."""
        inputs, targets = [], []
        mb_seed = combine_seeds(combine_seeds(self.seed, step), mb)
        for r in range(self.micro_batch_size):
            rng = Rng(combine_seeds(mb_seed, r))
            tok = rng.below(self.vocab)
            for _ in range(self.seq_len):
                nxt = rng.below(self.vocab) if rng.uniform_double() < self.noise else self.successor[tok]
                inputs.append(tok)
                targets.append(nxt)
                tok = nxt
        shape = (self.micro_batch_size, self.seq_len)
        return (torch.tensor(inputs, dtype=torch.int64).view(shape),
                torch.tensor(targets, dtype=torch.int64).view(shape))


def probe_seed(job_seed, step):
    return combine_seeds(combine_seeds(job_seed, 0x70726F6265), step)


def hash_floats(values):
    """checksum.h HashFloats over float32 values."""
    h = 0
    raw = struct.pack("<%df" % len(values), *values)
    for i, (bits,) in enumerate(struct.iter_unpack("<I", raw)):
        h = (h + mix64((bits + (i + 1) * _GOLDEN) & _M64)) & _M64
    return h


def known_answer_gemm(seed, n):
    """Y = X W^T (float32 [n, n]) for X then W drawn from Rng(seed) as integers in [-8, 8]
    (kernels/cpu/known_answer_gemm.h): every sum is exact in float32, so torch.matmul, the kernel
    the PyTorch worker trains with, gives the known answer bit for bit."""
    rng = Rng(seed)
    draw = lambda: torch.tensor([float(rng.below(17) - 8) for _ in range(n * n)], dtype=torch.float32).view(n, n)
    x, w = draw(), draw()
    return torch.matmul(x, w.t())


def sketch_checksum(y, seed):
    """known_answer_gemm.h's ProbeChecksum of y (float32 [m, n], the probe's X [m, k] W [n, k]^T
    with k = m here): weights r [m] then c [n] from Rng(combine_seeds(seed, "sketch")) as integers
    in [1, 16]; the row sketch r^T Y and the column sketch Y c over the elements that are
    integers (int64), hashed with (m, k, n, how many are not) as mix64(word + (i + 1) * golden)."""
    m, n = y.shape
    k = m
    rng = Rng(combine_seeds(seed, 0x736B65746368))
    r = torch.tensor([rng.below(16) + 1 for _ in range(m)], dtype=torch.int64)
    c = torch.tensor([rng.below(16) + 1 for _ in range(n)], dtype=torch.int64)
    good = torch.isfinite(y) & (y.abs() <= 2.0 ** 24) & (y == torch.trunc(y))
    yi = torch.where(good, y, torch.zeros_like(y)).to(torch.int64)
    words = [m, k, n, int((~good).sum())] + (r @ yi).tolist() + (yi @ c).tolist()
    h = 0
    for i, v in enumerate(words):
        h = (h + mix64(((v & _M64) + (i + 1) * _GOLDEN) & _M64)) & _M64
    return h


def probe_checksum(job_seed, step, n):
    """What a healthy rank reports for its PROBE at `step` (an n x n x n GEMM)."""
    seed = probe_seed(job_seed, step)
    return sketch_checksum(known_answer_gemm(seed, n), seed)
