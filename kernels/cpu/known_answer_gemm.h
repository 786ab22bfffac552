// Known-answer GEMM for numerical (aadiff) probes: a matrix product whose inputs come from a
// seed, so the coordinator can compute the answer a healthy worker must report and compare it
// bit for bit (kernels/cpu/checksum.h's HashFloats of the output).
//
// Inputs: X [n, n] then W [n, n] drawn from Rng(seed) as integers in [-8, 8] (Below(17) - 8).
// Every product and every partial sum is then an integer of magnitude at most 64 n, exact in
// fp32 for n <= 2^18: ANY correct fp32 GEMM, in any summation order (OpenBLAS's blocking,
// cuBLAS, PyTorch's matmul, the reference loops), gives exactly these bits. So the worker runs
// its probe through the kernel it trains with (ProbeInputs + its own GEMM), and a kernel that
// corrupts its output is caught, while the coordinator computes the answer with the reference.
#ifndef PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
#define PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_

#include <cstdint>
#include <vector>

namespace pipecoord::kernels::cpu {

// The seed of the probe a rank runs at `step` of a job whose probes are keyed by `job_seed`.
uint64_t ProbeSeed(uint64_t job_seed, int step);

// The seeded inputs X then W, n * n floats each (integers in [-8, 8]).
struct ProbeInputs {
  std::vector<float> x, w;
};
ProbeInputs MakeProbeInputs(uint64_t seed, int n);

// Y = X W^T for the seeded n x n inputs (n >= 1, at most kMaxProbeSize); n * n floats, by the
// reference loops.
std::vector<float> KnownAnswerGemm(uint64_t seed, int n);

// Largest n whose sums stay exact in fp32 (64 n <= 2^24).
inline constexpr int kMaxProbeSize = 1 << 18;

// HashFloats(KnownAnswerGemm(seed, n)).
uint64_t KnownAnswerChecksum(uint64_t seed, int n);

// The probe size when a job sets none (HealthConfig.probe_size 0).
inline constexpr int kDefaultProbeSize = 32;

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
