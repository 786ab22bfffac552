// Known-answer GEMM for numerical (aadiff) probes: a matrix product whose inputs come from a
// seed, so the coordinator knows the answer a healthy worker must report without trusting it.
//
// Inputs: X [m, k] then W [n, k] drawn from Rng(seed) as integers in [-8, 8] (Below(17) - 8).
// Every product and every partial sum is then an integer of magnitude at most 64 k, exact in
// fp32 for k <= 2^18: ANY correct fp32 GEMM, in any summation order (OpenBLAS's blocking,
// cuBLAS, PyTorch's matmul, the reference loops), gives exactly these bits. So the worker runs
// its probe through the kernel it trains with, at the shapes it trains at (jobplan/probe_shape.h:
// the stage's largest GEMM), and a kernel that corrupts its output is caught.
//
// What is reported is a sketch of Y = X W^T, not Y: with weights r [m] and c [n] drawn from the
// seed as integers in [1, 16], the row sketch r^T Y [n] and the column sketch Y c [m], summed in
// int64, hashed with the shape and the count of elements that are not finite integers. The
// coordinator computes the same sketch in O(mk + nk) as (r^T X) W^T and X (W^T c), never the
// O(mnk) product, so checking a rank's probe costs it less than generating the inputs. Any
// single wrong element changes both sketches (its r_i and c_j are >= 1); a non-integral one
// changes the count. Two wrong elements could cancel in one sketch, not in both unless chosen so.
#ifndef PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
#define PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pipecoord::kernels::cpu {

// Y [m, n] = X [m, k] W [n, k]^T.
struct ProbeShape {
  int64_t m = 0, k = 0, n = 0;
  bool operator==(const ProbeShape&) const = default;
  std::string ToString() const;  // "128x64x192 GEMM"
};

// Largest k whose sums stay exact in fp32 (64 k <= 2^24).
inline constexpr int64_t kMaxProbeInner = 1 << 18;
// Most elements of X, W or Y a probe may have (what a worker and the coordinator allocate).
inline constexpr int64_t kMaxProbeElements = int64_t{1} << 28;
// 1 <= m, k, n; k <= kMaxProbeInner; m k, n k and m n <= kMaxProbeElements.
bool ValidProbeShape(const ProbeShape& s);

// The seed of the probe a rank runs at `step` of a job whose probes are keyed by `job_seed`.
uint64_t ProbeSeed(uint64_t job_seed, int step);

// The seeded inputs X (m k floats) then W (n k floats), integers in [-8, 8].
struct ProbeInputs {
  std::vector<float> x, w;
};
ProbeInputs MakeProbeInputs(uint64_t seed, const ProbeShape& shape);

// What a worker reports: the sketch checksum of its output y (m n floats, row-major), computed
// on the host in int64 (O(mn)).
uint64_t ProbeChecksum(const float* y, const ProbeShape& shape, uint64_t seed);

// What a healthy worker reports, from the seeded inputs alone (O(mk + nk)).
uint64_t KnownAnswerChecksum(uint64_t seed, const ProbeShape& shape);

// Y = X W^T by the reference loops (tests: an independent route to the same checksum).
std::vector<float> KnownAnswerGemm(uint64_t seed, const ProbeShape& shape);

// The probe size when a job sets none and its workers cannot size it to the model (torch
// workers: n x n x n).
inline constexpr int kDefaultProbeSize = 32;

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_KNOWN_ANSWER_GEMM_H_
