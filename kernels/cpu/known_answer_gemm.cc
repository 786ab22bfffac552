#include "kernels/cpu/known_answer_gemm.h"

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {

uint64_t ProbeSeed(uint64_t job_seed, int step) {
  return CombineSeeds(CombineSeeds(job_seed, 0x70726f6265ULL), static_cast<uint64_t>(step));
}

ProbeInputs MakeProbeInputs(uint64_t seed, int n) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  ProbeInputs in{std::vector<float>(nn), std::vector<float>(nn)};
  Rng rng(seed);
  for (float& v : in.x) v = static_cast<float>(static_cast<int>(rng.Below(17)) - 8);
  for (float& v : in.w) v = static_cast<float>(static_cast<int>(rng.Below(17)) - 8);
  return in;
}

std::vector<float> KnownAnswerGemm(uint64_t seed, int n) {
  const ProbeInputs in = MakeProbeInputs(seed, n);
  std::vector<float> y(static_cast<size_t>(n) * n);
  LinearForwardReference(in.x.data(), in.w.data(), y.data(), LinearDims{n, n, n});
  return y;
}

uint64_t KnownAnswerChecksum(uint64_t seed, int n) {
  const std::vector<float> y = KnownAnswerGemm(seed, n);
  return HashFloats(y.data(), static_cast<int64_t>(y.size()));
}

}  // namespace pipecoord::kernels::cpu
