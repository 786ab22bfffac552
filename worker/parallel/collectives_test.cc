// The ring collectives over a real TCP mesh on loopback: results against exact formulas (integer
// values, whose sums are exact in f32 in any order) and, for random floats, against the documented
// order of additions bit for bit; every member bit-identical, reruns too; reduce-scatter then
// all-gather is a sum; the errors name the collective, member, round, chunk and peer.
#include "worker/parallel/collectives.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "worker/transport/test_util.h"

namespace pipecoord::worker::parallel {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using worker::testing::MakeMesh;

constexpr milliseconds kLong(20000);
using Mesh = std::vector<std::unique_ptr<TcpTransport>>;
using Collective = std::function<Status(Transport&, const Group&, int, FloatBuffer&, const RingOptions&)>;

// Runs `op` on every member of `ranks` (indices into the mesh, in ring order) at once.
std::vector<Status> RunAll(Mesh& mesh, const std::vector<int>& ranks, int step, std::vector<std::vector<float>>& data,
                        const Collective& op, RingOptions options = {kLong}) {
  std::vector<Status> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      HostFloats buffer(data[i]);
      results[i] = op(*mesh[ranks[i]], Group{ranks, static_cast<int>(i)}, step, buffer, options);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<std::vector<float>> RandomInputs(int n, size_t len, int seed) {
  std::vector<std::vector<float>> input(n, std::vector<float>(len));
  for (int i = 0; i < n; ++i) {
    std::mt19937 rng(seed + i);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (float& x : input[i]) x = normal(rng) * std::pow(10.f, static_cast<float>(rng() % 7) - 3);
  }
  return input;
}

// Chunk c's sum as the header documents it: members first, first + 1, ..., first + n - 1 (mod n),
// left to right, each addition received + own in f32.
float OrderedSum(const std::vector<std::vector<float>>& in, size_t k, int first) {
  const int n = static_cast<int>(in.size());
  float sum = in[first % n][k];
  for (int j = 1; j < n; ++j) sum = in[(first + j) % n][k] + sum;
  return sum;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const std::vector<size_t> kLengths = {0, 1, 2, 3, 5, 1000, 1001, 65537};

TEST(CollectivesTest, AllReduceIntegersSumExactly) {
  for (int n : {2, 3, 4}) {
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    int step = 0;
    for (size_t len : kLengths) {
      SCOPED_TRACE("n=" + std::to_string(n) + " len=" + std::to_string(len));
      std::vector<std::vector<float>> data(n, std::vector<float>(len));
      for (int i = 0; i < n; ++i)
        for (size_t j = 0; j < len; ++j) data[i][j] = static_cast<float>((i + 1) * 100000 + j % 1000);
      for (const Status& s : RunAll(*mesh, Iota(n), step++, data, AllReduceSum)) ASSERT_TRUE(s.ok()) << s.ToString();
      for (int i = 0; i < n; ++i)
        for (size_t j = 0; j < len; ++j)
          ASSERT_EQ(data[i][j], static_cast<float>(n * (n + 1) / 2 * 100000 + n * static_cast<int>(j % 1000)))
              << "member " << i << " element " << j;
    }
  }
}

// AllReduceSum: chunk c over members c, c+1, ..., c-1; ReduceScatterSum: over c+1, ..., c. Bit for
// bit on random floats whose sums depend on the order, the same on every member and every run.
TEST(CollectivesTest, SumsFollowTheDocumentedOrderBitForBit) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    constexpr size_t kLen = 10007;
    const auto input = RandomInputs(n, kLen, 77);
    for (int run = 0; run < 2; ++run) {
      auto all = input;
      for (const Status& s : RunAll(*mesh, Iota(n), 2 * run, all, AllReduceSum)) ASSERT_TRUE(s.ok()) << s.ToString();
      auto scattered = input;
      for (const Status& s : RunAll(*mesh, Iota(n), 2 * run + 1, scattered, ReduceScatterSum)) ASSERT_TRUE(s.ok());
      for (int c = 0; c < n; ++c) {
        for (size_t k = ChunkBegin(kLen, n, c); k < ChunkBegin(kLen, n, c + 1); ++k) {
          const float want_all = OrderedSum(input, k, c), want_scatter = OrderedSum(input, k, c + 1);
          for (int i = 0; i < n; ++i) ASSERT_TRUE(SameBits(all[i][k], want_all)) << "member " << i << " element " << k;
          ASSERT_TRUE(SameBits(scattered[c][k], want_scatter)) << "chunk " << c << " element " << k;
        }
      }
    }
  }
}

TEST(CollectivesTest, ReduceScatterThenAllGatherIsASum) {
  for (int n : {2, 3, 4}) {
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    int step = 0;
    for (size_t len : kLengths) {
      SCOPED_TRACE("n=" + std::to_string(n) + " len=" + std::to_string(len));
      std::vector<std::vector<float>> data(n, std::vector<float>(len));
      for (int i = 0; i < n; ++i)
        for (size_t j = 0; j < len; ++j) data[i][j] = static_cast<float>(i * 1000 + j % 997);
      for (const Status& s : RunAll(*mesh, Iota(n), step++, data, ReduceScatterSum)) ASSERT_TRUE(s.ok());
      // Member i's own chunk is the full sum: a ZeRO shard, before any gather.
      for (int i = 0; i < n; ++i)
        for (size_t j = ChunkBegin(len, n, i); j < ChunkBegin(len, n, i + 1); ++j)
          ASSERT_EQ(data[i][j], static_cast<float>(n * (n - 1) / 2 * 1000 + n * static_cast<int>(j % 997)));
      for (const Status& s : RunAll(*mesh, Iota(n), step++, data, AllGather)) ASSERT_TRUE(s.ok());
      for (int i = 0; i < n; ++i)
        for (size_t j = 0; j < len; ++j)
          ASSERT_EQ(data[i][j], static_cast<float>(n * (n - 1) / 2 * 1000 + n * static_cast<int>(j % 997)))
              << "member " << i << " element " << j;
    }
  }
}

TEST(CollectivesTest, AllGatherCopiesEachMembersChunkToEveryone) {
  const int n = 3;
  auto mesh = MakeMesh(n);
  ASSERT_TRUE(mesh.ok());
  constexpr size_t kLen = 11;  // chunks of 3, 4, 4
  std::vector<std::vector<float>> data(n, std::vector<float>(kLen, -1.f));
  for (int i = 0; i < n; ++i)
    for (size_t j = ChunkBegin(kLen, n, i); j < ChunkBegin(kLen, n, i + 1); ++j) data[i][j] = 100.f * i + j;
  for (const Status& s : RunAll(*mesh, Iota(n), 0, data, AllGather)) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < n; ++c)
      for (size_t j = ChunkBegin(kLen, n, c); j < ChunkBegin(kLen, n, c + 1); ++j) EXPECT_EQ(data[i][j], 100.f * c + j);
}

// A backend's gradients are several buffers: the mean over them in place equals the ring over
// their concatenation times 1/n, bit for bit (what the executor computed with a flat copy).
TEST(CollectivesTest, AMeanOverSeveralSpansIsTheFlatRingTimesOneOverN) {
  const int n = 3;
  auto mesh = MakeMesh(n);
  ASSERT_TRUE(mesh.ok());
  const std::vector<size_t> sizes = {0, 7, 1, 100, 0, 33};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  const auto input = RandomInputs(n, total, 5);
  auto flat = input;
  for (const Status& s : RunAll(*mesh, Iota(n), 0, flat, AllReduceSum)) ASSERT_TRUE(s.ok());
  auto parts = input;
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      std::vector<std::span<float>> spans;
      size_t at = 0;
      for (size_t s : sizes) {
        spans.push_back(std::span<float>(parts[i]).subspan(at, s));
        at += s;
      }
      results[i] = AllReduceMean(*(*mesh)[i], Group{Iota(n), i}, 1, spans, {kLong});
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < total; ++k) ASSERT_TRUE(SameBits(parts[i][k], flat[i][k] * (1.0f / n))) << i << " " << k;
}

TEST(CollectivesTest, DisjointGroupsOfOneMeshRunAtOnce) {
  auto mesh = MakeMesh(4);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  // Groups {3, 1} and {0, 2} (ring order as listed), as two data-parallel groups would.
  const std::vector<std::vector<int>> groups = {{3, 1}, {0, 2}};
  std::vector<std::vector<float>> data(4, std::vector<float>(9));
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 9; ++j) data[r][j] = static_cast<float>(r * 10 + j);
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (const auto& g : groups) {
    for (size_t i = 0; i < g.size(); ++i) {
      threads.emplace_back([&, g, i] {
        HostFloats buffer(data[g[i]]);
        results[g[i]] = AllReduceSum(*(*mesh)[g[i]], Group{g, static_cast<int>(i)}, 0, buffer, {kLong});
      });
    }
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  for (int j = 0; j < 9; ++j) {
    EXPECT_EQ(data[1][j], 40.f + 2 * j);
    EXPECT_EQ(data[3][j], 40.f + 2 * j);
    EXPECT_EQ(data[0][j], 20.f + 2 * j);
    EXPECT_EQ(data[2][j], 20.f + 2 * j);
  }
}

TEST(CollectivesTest, AGroupOfOneLeavesTheDataAlone) {
  auto mesh = MakeMesh(1);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data{1.5f, -2.f};
  HostFloats buffer(data);
  for (const Collective& op : std::vector<Collective>{AllReduceSum, ReduceScatterSum, AllGather}) {
    EXPECT_TRUE(op(*(*mesh)[0], Group{{0}, 0}, 0, buffer, {kLong}).ok());
  }
  EXPECT_TRUE(AllReduceMean(*(*mesh)[0], Group{{0}, 0}, 0, {data}, {kLong}).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.f}));
}

TEST(CollectivesTest, RejectsBadArgumentsNamingTheRule) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data(4);
  HostFloats buffer(data);
  Transport& t = *(*mesh)[0];
  Status s = ReduceScatterSum(t, Group{{0, 1}, 2}, 0, buffer, {kLong});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "ReduceScatterSum: the member index must be in 0..1 (the group has 2 members), got 2");
  EXPECT_EQ(AllGather(t, Group{{0, 0}, 0}, 0, buffer, {kLong}).message(), "AllGather: the group repeats a rank");
  EXPECT_EQ(AllReduceSum(t, Group{{0, 1}, 0}, 0, buffer, {kLong, 1}).message(),
            "AllReduceSum: channel must be >= 2 (0 and 1 carry activations and gradients), got 1");
  EXPECT_EQ(AllReduceSum(t, Group{{}, 0}, 0, buffer, {kLong}).message(), "AllReduceSum: the group is empty");
}

TEST(CollectivesTest, MembersWithDifferentLengthsAreReported) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<std::vector<float>> data = {std::vector<float>(10), std::vector<float>(12)};
  for (const Status& s : RunAll(*mesh, {0, 1}, 0, data, AllReduceSum)) {
    EXPECT_EQ(s.code(), Code::kInternal);
    EXPECT_THAT(s.message(), HasSubstr("do all members pass the same data length?"));
  }
}

TEST(CollectivesTest, AMissingMemberTimesOutNamingTheRank) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<float> data(8, 1.f);
  HostFloats buffer(data);
  Status s = AllReduceSum(*(*mesh)[0], Group{{0, 1}, 0}, 3, buffer, {milliseconds(100)});
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("AllReduceSum step 3 (member 0 of 2, rank 0): receiving chunk 1 in round 0 from rank 1"));
  EXPECT_THAT(s.message(), HasSubstr("timed out after"));
}

// A buffer whose Add fails, as a device call might: the error names where the ring was.
class FailingAdds final : public FloatBuffer {
 public:
  explicit FailingAdds(std::vector<float>& data) : host_(data) {}
  size_t size() const override { return host_.size(); }
  Result<kernels::Tensor> Read(size_t begin, size_t count) override { return host_.Read(begin, count); }
  Status Add(size_t, const kernels::Tensor&) override { return Internal("cudaMemcpyAsync: an illegal address"); }
  Status Write(size_t begin, const kernels::Tensor& chunk) override { return host_.Write(begin, chunk); }
  Status Scale(size_t begin, size_t count, float factor) override { return host_.Scale(begin, count, factor); }

 private:
  HostFloats host_;
};

TEST(CollectivesTest, TheBuffersErrorNamesTheRoundAndChunk) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok());
  std::vector<std::vector<float>> data(2, std::vector<float>(6, 1.f));
  std::vector<Status> results(2);
  std::thread other([&] {
    HostFloats buffer(data[1]);
    results[1] = AllReduceSum(*(*mesh)[1], Group{{0, 1}, 1}, 5, buffer, {milliseconds(2000)});
  });
  FailingAdds failing(data[0]);
  results[0] = AllReduceSum(*(*mesh)[0], Group{{0, 1}, 0}, 5, failing, {milliseconds(2000)});
  other.join();
  EXPECT_EQ(results[0].code(), Code::kInternal);
  EXPECT_EQ(results[0].message(), "AllReduceSum step 5 (member 0 of 2, rank 0): adding chunk 1 in round 0: "
                                  "cudaMemcpyAsync: an illegal address");
}

}  // namespace
}  // namespace pipecoord::worker::parallel
