// Known-answer GEMM for numerical (aadiff) probes: a small matrix product whose inputs come
// from a seed, so the coordinator can compute the answer a healthy worker must report and
// compare it bit for bit (kernels/cpu/checksum.h's HashFloats of the output).
//
// Inputs: X [n, n] then W [n, n] drawn from Rng(seed), uniform in [-1, 1); output Y = X W^T by
// LinearForwardReference (sums in double, one rounding per element; not the BLAS GEMM, whose
// bits depend on the library and the machine), so every build of this file on
// every machine gives the same bits.
#ifndef PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
#define PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_

#include <cstdint>
#include <vector>

namespace pipecoord::kernels::cpu {

// The seed of the probe a rank runs at `step` of a job whose probes are keyed by `job_seed`.
uint64_t ProbeSeed(uint64_t job_seed, int step);

// Y = X W^T for the seeded n x n inputs (n >= 1); n * n floats.
std::vector<float> KnownAnswerGemm(uint64_t seed, int n);

// HashFloats(KnownAnswerGemm(seed, n)).
uint64_t KnownAnswerChecksum(uint64_t seed, int n);

// The probe size when a job sets none (HealthConfig.probe_size 0).
inline constexpr int kDefaultProbeSize = 32;

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
