#!/usr/bin/env python3
"""Known answers for kernels/cpu's RNG, checksums and known-answer GEMM, computed independently.

This is a second implementation, written from the documented contracts (rng.h, checksum.h,
known_answer_gemm.h, linear.h) and the published algorithms (SplitMix64, xoshiro256**, FNV-1a)
in plain Python 3 with the standard library only. Python floats are IEEE doubles; float32 is
emulated by a struct.pack('<f') round trip (round to nearest even) exactly where the C++ casts
to float. Its output is kernels/cpu/known_answers_for_tests.h, which the C++ tests compare with.

  /usr/bin/python3 kernels/cpu/known_answers.py            # print the header
  /usr/bin/python3 kernels/cpu/known_answers.py --write    # rewrite known_answers_for_tests.h
  /usr/bin/python3 kernels/cpu/known_answers.py --check    # exit 1 if the header differs

(bazel test //kernels/cpu:known_answers_test runs --check.)
"""
import difflib
import os
import struct
import sys

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_answers_for_tests.h")


# --- rng.h -------------------------------------------------------------------------------------

def mix64(z):
    """SplitMix64's finaliser (Steele, Lea & Flood; constants from Vigna's splitmix64.c)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class SplitMix64:
    def __init__(self, state):
        self.state = state & M64

    def next(self):
        self.state = (self.state + GOLDEN) & M64
        return mix64(self.state)


def hash_string(s):
    """FNV-1a, 64 bit, over the UTF-8 bytes."""
    h = 0xCBF29CE484222325
    for byte in s.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & M64
    return h


def combine_seeds(a, b):
    return mix64((mix64(a) + GOLDEN * (b + 1)) & M64)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Rng:
    """xoshiro256** (Blackman & Vigna), state = four SplitMix64 outputs from the seed."""

    def __init__(self, seed):
        sm = SplitMix64(seed)
        self.s = [sm.next() for _ in range(4)]

    def next(self):
        s = self.s
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def uniform_double(self):
        return (self.next() >> 11) * 2.0 ** -53  # exact: 53 bits times a power of two

    def below(self, n):
        return ((self.next() >> 32) * n) >> 32

    def fill_uniform_double(self, n, lo, hi):
        return [lo + (hi - lo) * self.uniform_double() for _ in range(n)]

    def fill_uniform_float(self, n, lo, hi):
        return [to_f32(v) for v in self.fill_uniform_double(n, lo, hi)]


# --- float32 -----------------------------------------------------------------------------------

def to_f32(x):
    """Rounds a double to the nearest float (ties to even), as static_cast<float> does."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


# --- checksum.h --------------------------------------------------------------------------------

BLOCK = 256


def hash_floats(xs):
    h = 0
    for i, x in enumerate(xs):
        h = (h + mix64((f32_bits(x) + (i + 1) * GOLDEN) & M64)) & M64
    return h


def ordered_sum(xs):
    level = []
    for b in range(0, len(xs), BLOCK):
        s = 0.0
        for x in xs[b:b + BLOCK]:
            s += x
        level.append(s)
    if not level:
        return 0.0
    while len(level) > 1:
        nxt = [level[j] + level[j + 1] for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


# --- known_answer_gemm.h -----------------------------------------------------------------------

def probe_seed(job_seed, step):
    return combine_seeds(combine_seeds(job_seed, 0x70726F6265), step)  # "probe" in ASCII


def known_answer_gemm(seed, m, k=None, n=None):
    """Y [m, n] = X [m, k] W [n, k]^T, X then W drawn from Rng(seed) as integers in [-8, 8]
    (below(17) - 8); each y an exact integer sum (Python ints), then a float: exact, since
    |y| <= 64 k < 2^24. known_answer_gemm(seed, n): the n x n x n square."""
    k = m if k is None else k
    n = m if n is None else n
    rng = Rng(seed)
    x = [rng.below(17) - 8 for _ in range(m * k)]
    w = [rng.below(17) - 8 for _ in range(n * k)]
    y = []
    for t in range(m):
        xr = x[t * k:(t + 1) * k]
        for o in range(n):
            wr = w[o * k:(o + 1) * k]
            y.append(to_f32(float(sum(a * b for a, b in zip(xr, wr)))))
    return y


def hash_words(words):
    """The sketch's hash: sum of mix64(word + (i + 1) * GOLDEN) over the 64-bit words."""
    h = 0
    for i, v in enumerate(words):
        h = (h + mix64(((v & M64) + (i + 1) * GOLDEN) & M64)) & M64
    return h


def probe_checksum(y, seed, m, k, n):
    """known_answer_gemm.h's sketch of Y, straight from its definition: weights r [m] then c [n]
    from Rng(combine_seeds(seed, "sketch")) as integers in [1, 16]; the row sketch r^T Y and the
    column sketch Y c over the elements that are integers; hashed after (m, k, n, how many are not)."""
    rng = Rng(combine_seeds(seed, 0x736B65746368))
    r = [rng.below(16) + 1 for _ in range(m)]
    c = [rng.below(16) + 1 for _ in range(n)]
    bad = sum(1 for v in y if not (abs(v) <= 2.0 ** 24 and v == int(v)))
    ok = lambda v: int(v) if (abs(v) <= 2.0 ** 24 and v == int(v)) else 0
    row = [sum(r[i] * ok(y[i * n + j]) for i in range(m)) for j in range(n)]
    col = [sum(c[j] * ok(y[i * n + j]) for j in range(n)) for i in range(m)]
    return hash_words([m, k, n, bad] + row + col)


def known_answer_checksum(seed, m, k=None, n=None):
    k = m if k is None else k
    n = m if n is None else n
    return probe_checksum(known_answer_gemm(seed, m, k, n), seed, m, k, n)


# --- published test vectors: the building blocks above are the published algorithms ----------

def check_published_vectors():
    sm = SplitMix64(0)  # Vigna's splitmix64.c from state 0
    assert [sm.next(), sm.next()] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    r = Rng(0)
    r.s = [1, 2, 3, 4]  # xoshiro256starstar.c from the state {1, 2, 3, 4}
    assert [r.next() for _ in range(4)] == [11520, 0, 1509978240, 1215971899390074240]
    assert hash_string("a") == 0xAF63DC4C8601EC8C  # FNV's test suite: FNV-1a 64 of "a"
    assert hash_string("foobar") == 0x85944171F73967E8
    assert to_f32(1.0 + 2.0 ** -24) == 1.0 and to_f32(1.0 + 3 * 2.0 ** -24) == 1.0 + 2.0 ** -22


# --- output ------------------------------------------------------------------------------------

def u64(v):
    return "0x%016XULL" % v


def u32(v):
    return "0x%08Xu" % v


def array(ctype, name, values):
    return "inline constexpr %s %s[] = {%s};" % (ctype, name, ", ".join(values))


def render():
    check_published_vectors()
    out = []
    add = out.append
    add("// Generated by kernels/cpu/known_answers.py, an independent Python implementation of")
    add("// rng.h, checksum.h and known_answer_gemm.h. Do not edit: rerun")
    add("//   /usr/bin/python3 kernels/cpu/known_answers.py --write")
    add("// (//kernels/cpu:known_answers_test fails when this file and the script disagree).")
    add("#ifndef PIPECOORD_KERNELS_CPU_KNOWN_ANSWERS_FOR_TESTS_H_")
    add("#define PIPECOORD_KERNELS_CPU_KNOWN_ANSWERS_FOR_TESTS_H_")
    add("")
    add("#include <cstdint>")
    add("")
    add("namespace pipecoord::kernels::cpu::known_answers {")
    add("")

    add("// SplitMix64 from state 0; Mix64 of a few words.")
    sm = SplitMix64(0)
    add(array("uint64_t", "kSplitMix64FromZero", [u64(sm.next()) for _ in range(3)]))
    add(array("uint64_t", "kMix64Inputs", [u64(v) for v in (0, 1, GOLDEN)]))
    add(array("uint64_t", "kMix64Outputs", [u64(mix64(v)) for v in (0, 1, GOLDEN)]))
    add("")

    add("// Rng(seed).Next(), the first five outputs.")
    for seed in (0, 7, 0xDEADBEEF):
        r = Rng(seed)
        add(array("uint64_t", "kRngNextSeed%s" % ("%d" % seed if seed < 100 else "DEADBEEF"),
                  [u64(r.next()) for _ in range(5)]))
    add("")

    add("// Rng(3): UniformDouble() three times (bit patterns), then Below(10) twenty times.")
    r = Rng(3)
    add(array("uint64_t", "kRng3UniformDoubleBits", [u64(f64_bits(r.uniform_double()))
                                                     for _ in range(3)]))
    add(array("uint32_t", "kRng3ThenBelow10", [str(r.below(10)) for _ in range(20)]))
    add("// Rng(5).Below(1000003), five times.")
    r = Rng(5)
    add(array("uint32_t", "kRng5Below1000003", [str(r.below(1000003)) for _ in range(5)]))
    add("")

    add("// Rng(71).FillUniform(float*, 6, -1, 1) bit patterns; Rng(9).FillUniform(double*, 3,")
    add("// -2.5, 4) bit patterns.")
    add(array("uint32_t", "kRng71FloatBits", [u32(f32_bits(v))
                                              for v in Rng(71).fill_uniform_float(6, -1.0, 1.0)]))
    add(array("uint64_t", "kRng9DoubleBits", [u64(f64_bits(v))
                                              for v in Rng(9).fill_uniform_double(3, -2.5, 4.0)]))
    add("")

    add("// HashString (FNV-1a) and CombineSeeds.")
    add("inline constexpr uint64_t kHashStringEmpty = %s;" % u64(hash_string("")))
    add("inline constexpr uint64_t kHashStringA = %s;  // \"a\"" % u64(hash_string("a")))
    add("inline constexpr uint64_t kHashStringWq = %s;  // \"layers.1.attention.wq\""
        % u64(hash_string("layers.1.attention.wq")))
    add("inline constexpr uint64_t kCombineSeeds1And2 = %s;" % u64(combine_seeds(1, 2)))
    add("inline constexpr uint64_t kCombineSeeds2And1 = %s;" % u64(combine_seeds(2, 1)))
    add("")

    buf = Rng(71).fill_uniform_float(1000, -1.0, 1.0)
    add("// Checksums of Rng(71).FillUniform(float*, 1000, -1, 1) and of a few small buffers.")
    add("inline constexpr uint64_t kHashOfBuffer71x1000 = %s;" % u64(hash_floats(buf)))
    add("inline constexpr uint64_t kOrderedSumOfBuffer71x1000Bits = %s;"
        % u64(f64_bits(ordered_sum(buf))))
    add("inline constexpr uint64_t kHashOfOne = %s;  // {1.0f}" % u64(hash_floats([1.0])))
    add("inline constexpr uint64_t kHashOfOneTwoThree = %s;  // {1, 2, 3}"
        % u64(hash_floats([1.0, 2.0, 3.0])))
    add("inline constexpr uint64_t kHashOfNegativeZero = %s;  // {-0.0f}"
        % u64(hash_floats([-0.0])))
    add("")

    add("// ProbeSeed(job_seed, step).")
    add("inline constexpr uint64_t kProbeSeed3Step5 = %s;" % u64(probe_seed(3, 5)))
    add("inline constexpr uint64_t kProbeSeed3Step6 = %s;" % u64(probe_seed(3, 6)))
    add("inline constexpr uint64_t kProbeSeed0Step0 = %s;" % u64(probe_seed(0, 0)))
    add("")

    add("// KnownAnswerGemm(7, 3x3x3): the nine output bit patterns.")
    add(array("uint32_t", "kGemmSeed7N3Bits", [u32(f32_bits(v)) for v in known_answer_gemm(7, 3)]))
    add("// KnownAnswerChecksum(seed, {m, k, n}): the sketch of the whole product, from its definition.")
    add("struct GemmChecksum {")
    add("  uint64_t seed;")
    add("  int64_t m, k, n;")
    add("  uint64_t checksum;")
    add("};")
    add("inline constexpr GemmChecksum kGemmChecksums[] = {")
    for seed, m, k, n in ((7, 1, 1, 1), (11, 16, 16, 16), (probe_seed(3, 5), 32, 32, 32), (probe_seed(3, 6), 32, 32, 32),
                          (probe_seed(0, 0), 32, 32, 32), (42, 33, 33, 33), (5, 3, 5, 4), (9, 24, 64, 40),
                          (probe_seed(7, 2), 40, 16, 72)):
        add("    {%s, %d, %d, %d, %s}," % (u64(seed), m, k, n, u64(known_answer_checksum(seed, m, k, n))))
    add("};")
    add("")
    add("}  // namespace pipecoord::kernels::cpu::known_answers")
    add("")
    add("#endif  // PIPECOORD_KERNELS_CPU_KNOWN_ANSWERS_FOR_TESTS_H_")
    return "\n".join(out) + "\n"


def main(argv):
    text = render()
    if argv[1:] == ["--write"]:
        with open(HEADER, "w") as fh:
            fh.write(text)
        return 0
    if argv[1:] == ["--check"]:
        with open(HEADER) as fh:
            pasted = fh.read()
        if pasted == text:
            print("known_answers_for_tests.h matches known_answers.py")
            return 0
        sys.stdout.writelines(difflib.unified_diff(pasted.splitlines(True), text.splitlines(True),
                                                   "known_answers_for_tests.h", "known_answers.py"))
        print("known_answers_for_tests.h is stale or edited by hand; rerun with --write")
        return 1
    if len(argv) > 1:
        print(__doc__)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
