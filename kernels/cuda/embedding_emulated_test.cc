// The embedding kernels themselves (embedding_kernels.h, the code nvcc builds) run on the CPU
// under cuda_emulation.h, launched as embedding.cu launches them, against the CPU twin
// (kernels/cpu/embedding.h). CUB's stable radix sort between PrepareSortKernel and
// AccumulateRunsKernel is std::stable_sort here (the same order: by key, rows ascending).
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs (dtable always), 2e-2 for bf16 out, inputs rounded to bf16
// for the CPU twin. out starts as NaN, dtable (accumulated) from random values. Runs of equal
// ids cross the 32-position blocks; dim passes one 256-column block; bad ids are skipped.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/embedding_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using namespace embedding;  // NOLINT: the kernels under test

// embedding.cu's EmbeddingBackwardWeight, the sort done on the host.
template <typename T>
void EmulatedBackwardWeight(const std::vector<T>& dout, const std::vector<int32_t>& ids,
                            std::vector<float>* dtable, int64_t dim, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<uint32_t> keys_in(n), rows_in(n);
  Launch(dim3{device::GridBlocks(n, kThreads, 2), 1, 1}, dim3{kThreads, 1, 1},
         [&] { PrepareSortKernel(ids.data(), keys_in.data(), rows_in.data(), n, vocab); });
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys_in[a] < keys_in[b]; });
  std::vector<uint32_t> keys(n), rows(n);
  for (int64_t k = 0; k < n; ++k) {
    keys[k] = keys_in[order[k]];
    rows[k] = rows_in[order[k]];
  }
  const dim3 grid{static_cast<unsigned>((n + kPositionsPerBlock - 1) / kPositionsPerBlock),
                  static_cast<unsigned>((dim + kThreads - 1) / kThreads), 1};
  Launch(grid, dim3{kThreads, 1, 1}, [&] {
    AccumulateRunsKernel<T>(dout.data(), keys.data(), rows.data(), dtable->data(), n, dim,
                            static_cast<uint32_t>(vocab));
  });
}

std::vector<int32_t> RandomIds(uint64_t seed, int64_t n, int64_t vocab) {
  cpu::Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab)));
  return ids;
}

template <typename T>
class EmbeddingEmulatedTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(EmbeddingEmulatedTest, StorageTypes);

TYPED_TEST(EmbeddingEmulatedTest, ForwardAndWeightGradientMatchTheCpuTwin) {
  using T = TypeParam;
  struct Shape {
    int64_t n, dim, vocab;
  };
  for (const Shape s : {Shape{7, 33, 3}, Shape{120, 40, 13}, Shape{70, 300, 1},
                        Shape{60, 5, 1000}}) {
    SCOPED_TRACE(testing::Message() << "n " << s.n << " dim " << s.dim << " vocab " << s.vocab);
    const std::vector<float> table = RoundedTo<T>(Random(41 + s.n, s.vocab * s.dim, -1, 1));
    const std::vector<float> dout = RoundedTo<T>(Random(42 + s.n, s.n * s.dim, -1, 1));
    const std::vector<float> dtable_start = Random(43 + s.n, s.vocab * s.dim, -1, 1);
    const std::vector<int32_t> ids = RandomIds(44 + s.n, s.n, s.vocab);
    std::vector<float> out_cpu(s.n * s.dim), dtable_cpu = dtable_start;
    cpu::EmbeddingForward(table.data(), ids.data(), out_cpu.data(), s.n, s.dim);
    cpu::EmbeddingBackwardWeight(dout.data(), ids.data(), dtable_cpu.data(), s.n, s.dim);

    const std::vector<T> table_s = Stored<T>(table), dout_s = Stored<T>(dout);
    std::vector<T> out = Poisoned<T>(s.n * s.dim);
    Launch(dim3{static_cast<unsigned>(s.n), 1, 1}, dim3{kThreads, 1, 1}, [&] {
      EmbeddingForwardKernel<T>(table_s.data(), ids.data(), out.data(), s.dim, s.vocab);
    });
    std::vector<float> dtable = dtable_start;
    EmulatedBackwardWeight(dout_s, ids, &dtable, s.dim, s.vocab);

    const Comparison co = CompareToCpu(Floats(out), out_cpu);
    EXPECT_LT(co.error, emulation::ToleranceFor<T>()) << "out: " << co.Describe();
    const Comparison cd = CompareToCpu(dtable, dtable_cpu);
    EXPECT_LT(cd.error, kFloatTolerance) << "dtable: " << cd.Describe();
  }
}

// A bad id gives a row of NaN, kOtherRankId (-1, the vocabulary-parallel embedding's token of
// another rank) a row of zeros; the gradient skips both.
TEST(EmbeddingEmulatedBadIdTest, BadIdsGiveNanRowsAndAreSkippedByTheGradient) {
  const int64_t dim = 3, vocab = 4;
  const std::vector<int32_t> ids = {1, -2, 3, 4, 1, -1};
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::vector<float> table = Random(51, vocab * dim, -1, 1);
  const std::vector<float> dout = Random(52, n * dim, -1, 1);
  std::vector<float> out(n * dim, 7.0f);  // every row written
  Launch(dim3{static_cast<unsigned>(n), 1, 1}, dim3{kThreads, 1, 1},
         [&] { EmbeddingForwardKernel<float>(table.data(), ids.data(), out.data(), dim, vocab); });
  for (int64_t c = 0; c < dim; ++c) {
    EXPECT_EQ(out[c], table[1 * dim + c]);
    EXPECT_TRUE(std::isnan(out[1 * dim + c]));
    EXPECT_TRUE(std::isnan(out[3 * dim + c]));
    EXPECT_EQ(out[5 * dim + c], 0.0f);
  }
  std::vector<float> dtable(vocab * dim, 0.0f), want(vocab * dim, 0.0f);
  EmulatedBackwardWeight(dout, ids, &dtable, dim, vocab);
  for (const int64_t r : {0, 2, 4}) {  // rows 1, 3 and 5 skipped
    cpu::EmbeddingBackwardWeight(dout.data() + r * dim, ids.data() + r, want.data(), 1, dim);
  }
  EXPECT_EQ(dtable, want);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
