// DeviceAllReduceSum over a buffer the ring only reaches through Read / Add / Write (here host
// memory standing in for a GPU's gradients, over a real TCP mesh): bit for bit what
// AllReduceSum gives on the same inputs, for 2, 3 and 4 members and lengths with empty, uneven
// and large chunks; the errors of AllReduceSum, and the buffer's, naming the round and chunk.
#include "worker/transport/device_allreduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "worker/transport/allreduce.h"
#include "worker/transport/test_util.h"

namespace pipecoord::worker {
namespace {

using std::chrono::milliseconds;
using testing::MakeMesh;

constexpr milliseconds kLong(20000);

// Host floats behind the interface, as the CUDA backend's gradients are behind it on a device.
class HostFloats final : public DeviceFloatBuffer {
 public:
  explicit HostFloats(std::vector<float> values) : values_(std::move(values)) {}

  size_t size() const override { return values_.size(); }
  Result<kernels::Tensor> Read(size_t begin, size_t count) override {
    if (begin + count > values_.size()) return InvalidArgument("Read past the end");
    ++reads_;
    return kernels::Tensor::FromVector(std::vector<float>(values_.begin() + begin, values_.begin() + begin + count));
  }
  Status Add(size_t begin, const kernels::Tensor& chunk) override {
    if (!fail_add_.ok()) return fail_add_;
    const auto src = chunk.host_span<float>();
    if (begin + src.size() > values_.size() || src.size() != static_cast<size_t>(chunk.numel())) {
      return InvalidArgument("Add: bad chunk");
    }
    for (size_t k = 0; k < src.size(); ++k) values_[begin + k] = src[k] + values_[begin + k];
    return Status::Ok();
  }
  Status Write(size_t begin, const kernels::Tensor& chunk) override {
    const auto src = chunk.host_span<float>();
    if (begin + src.size() > values_.size()) return InvalidArgument("Write: bad chunk");
    std::copy(src.begin(), src.end(), values_.begin() + begin);
    return Status::Ok();
  }
  Status Scale(float factor) override {
    for (float& x : values_) x *= factor;
    return Status::Ok();
  }

  const std::vector<float>& values() const { return values_; }
  int reads() const { return reads_; }
  void FailAdds(Status why) { fail_add_ = std::move(why); }

 private:
  std::vector<float> values_;
  int reads_ = 0;
  Status fail_add_;
};

std::vector<int> Group(int n) {
  std::vector<int> g(n);
  for (int i = 0; i < n; ++i) g[i] = i;
  return g;
}

std::vector<Status> RunDevice(std::vector<std::unique_ptr<TcpTransport>>& mesh, const std::vector<int>& group, int step,
                              std::vector<HostFloats>& data, milliseconds timeout = kLong) {
  std::vector<Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < group.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = DeviceAllReduceSum(*mesh[group[i]], static_cast<int>(i), group, step, data[i], timeout);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<Status> RunHost(std::vector<std::unique_ptr<TcpTransport>>& mesh, const std::vector<int>& group, int step,
                            std::vector<std::vector<float>>& data) {
  std::vector<Status> results(group.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < group.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = AllReduceSum(*mesh[group[i]], static_cast<int>(i), group, step, data[i], kLong);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(DeviceAllReduceTest, EqualsTheHostRingBitForBit) {
  for (int n : {2, 3, 4}) {
    auto mesh = MakeMesh(n);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    const std::vector<int> group = Group(n);
    int step = 0;
    for (size_t len : {size_t{0}, size_t{1}, size_t{3}, size_t{5}, size_t{1001}, size_t{10007}}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " len=" + std::to_string(len));
      std::vector<std::vector<float>> input(n, std::vector<float>(len));
      for (int i = 0; i < n; ++i) {
        std::mt19937 rng(100 * n + i + static_cast<unsigned>(len));
        std::normal_distribution<float> normal(0.f, 1.f);
        // Magnitudes from 1e-3 to 1e3: the order of the additions shows in the last bits.
        for (float& x : input[i]) x = normal(rng) * std::pow(10.f, static_cast<float>(rng() % 7) - 3);
      }
      std::vector<std::vector<float>> host = input;
      for (const Status& s : RunHost(*mesh, group, step++, host)) ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<HostFloats> device;
      for (int i = 0; i < n; ++i) device.emplace_back(input[i]);
      for (const Status& s : RunDevice(*mesh, group, step++, device)) ASSERT_TRUE(s.ok()) << s.ToString();
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(device[i].values().size(), len);
        for (size_t j = 0; j < len; ++j) {
          ASSERT_TRUE(SameBits(device[i].values()[j], host[i][j]))
              << "member " << i << " element " << j << ": " << device[i].values()[j] << " vs " << host[i][j];
          ASSERT_TRUE(SameBits(device[i].values()[j], device[0].values()[j])) << "members differ at " << j;
        }
        EXPECT_EQ(device[i].reads(), 2 * (n - 1));  // one chunk sent per round
      }
    }
  }
}

TEST(DeviceAllReduceTest, AGroupOfOneIsANoOpAndArgumentsAreChecked) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  HostFloats one({1.f, 2.f});
  EXPECT_TRUE(DeviceAllReduceSum(*(*mesh)[0], 0, {0}, 0, one, kLong).ok());
  EXPECT_EQ(one.values(), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(one.reads(), 0);
  for (const Status& st : {DeviceAllReduceSum(*(*mesh)[0], 2, {0, 1}, 0, one, kLong),
                           DeviceAllReduceSum(*(*mesh)[0], 0, {0, 0}, 0, one, kLong),
                           DeviceAllReduceSum(*(*mesh)[0], 0, {}, 0, one, kLong),
                           DeviceAllReduceSum(*(*mesh)[0], 0, {0, 1}, 0, one, kLong, kGradientChannel)}) {
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  }
}

TEST(DeviceAllReduceTest, MembersWithDifferentLengthsFailNamingTheChunk) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  std::vector<HostFloats> data{HostFloats(std::vector<float>(10, 1.f)), HostFloats(std::vector<float>(12, 1.f))};
  const std::vector<Status> results = RunDevice(*mesh, Group(2), 4, data, milliseconds(2000));
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].code(), Code::kInternal) << results[1].ToString();
  EXPECT_EQ(results[1].message().rfind("DeviceAllReduceSum step 4 (member 1 of 2, rank 1): receiving chunk 0 in round 0 "
                                       "from rank 0: ",
                                       0),
            0u)
      << results[1].ToString();
  EXPECT_NE(results[1].message().find("(do all members pass the same data length?)"), std::string::npos);
}

TEST(DeviceAllReduceTest, TheBuffersErrorNamesTheRoundAndChunk) {
  auto mesh = MakeMesh(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
  std::vector<HostFloats> data{HostFloats(std::vector<float>(8, 1.f)), HostFloats(std::vector<float>(8, 2.f))};
  data[1].FailAdds(Internal("AddInPlaceKernel: an illegal memory access"));
  const std::vector<Status> results = RunDevice(*mesh, Group(2), 0, data, milliseconds(2000));
  EXPECT_EQ(results[1].code(), Code::kInternal);
  EXPECT_EQ(results[1].message(),
            "DeviceAllReduceSum step 0 (member 1 of 2, rank 1): adding chunk 0 in round 0: AddInPlaceKernel: an illegal "
            "memory access");
  // Its partner waits for the round that never comes, until the timeout.
  EXPECT_EQ(results[0].code(), Code::kUnavailable) << results[0].ToString();
  EXPECT_EQ(results[0].message().rfind("DeviceAllReduceSum step 0 (member 0 of 2, rank 0): receiving chunk 0 in round 1 "
                                       "from rank 1: ",
                                       0),
            0u)
      << results[0].ToString();
}

}  // namespace
}  // namespace pipecoord::worker
