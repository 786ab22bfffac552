#include "kernels/cpu/known_answer_gemm.h"

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {

uint64_t ProbeSeed(uint64_t job_seed, int step) {
  return CombineSeeds(CombineSeeds(job_seed, 0x70726f6265ULL), static_cast<uint64_t>(step));
}

std::vector<float> KnownAnswerGemm(uint64_t seed, int n) {
  const int64_t nn = static_cast<int64_t>(n) * n;
  std::vector<float> x(nn), w(nn), y(nn);
  Rng rng(seed);
  rng.FillUniform(x.data(), nn, -1.0, 1.0);
  rng.FillUniform(w.data(), nn, -1.0, 1.0);
  LinearForwardReference(x.data(), w.data(), y.data(), LinearDims{n, n, n});
  return y;
}

uint64_t KnownAnswerChecksum(uint64_t seed, int n) {
  const std::vector<float> y = KnownAnswerGemm(seed, n);
  return HashFloats(y.data(), static_cast<int64_t>(y.size()));
}

}  // namespace pipecoord::kernels::cpu
