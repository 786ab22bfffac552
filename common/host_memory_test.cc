#include "common/host_memory.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pipecoord {
namespace {

namespace fs = std::filesystem;

class HostMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
  }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  fs::path root_;
};

TEST_F(HostMemoryTest, MemTotalWithoutACgroupLimit) {
  Write("proc/meminfo", "MemFree:  100 kB\nMemTotal:       16384 kB\n");
  Write("sys/fs/cgroup/memory.max", "max\n");
  EXPECT_EQ(HostMemoryLimitBytes(root_.string()), 16384u * 1024);
}

TEST_F(HostMemoryTest, APodLimitBelowTheMachine) {
  Write("proc/meminfo", "MemTotal:       16384 kB\n");
  Write("sys/fs/cgroup/memory.max", "4194304\n");  // resources.limits.memory: 4Mi
  EXPECT_EQ(HostMemoryLimitBytes(root_.string()), 4194304u);
  Write("sys/fs/cgroup/memory.max", "max\n");
  Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1: none
  EXPECT_EQ(HostMemoryLimitBytes(root_.string()), 16384u * 1024);
  Write("sys/fs/cgroup/memory/memory.limit_in_bytes", "2097152\n");
  EXPECT_EQ(HostMemoryLimitBytes(root_.string()), 2097152u);
}

TEST_F(HostMemoryTest, NothingReadable) { EXPECT_EQ(HostMemoryLimitBytes(root_.string()), 0u); }

TEST(ParseByteSize, UnitsAndErrors) {
  EXPECT_EQ(ParseByteSize("8GiB", "--memory").value(), uint64_t{8} << 30);
  EXPECT_EQ(ParseByteSize("512MiB", "--memory").value(), uint64_t{512} << 20);
  EXPECT_EQ(ParseByteSize("300K", "--memory").value(), uint64_t{300} << 10);
  EXPECT_EQ(ParseByteSize("1048576", "--memory").value(), uint64_t{1048576});
  EXPECT_EQ(ParseByteSize("8GB", "--memory").status().message(),
            "--memory: must be a byte count such as 8GiB, 512MiB or 1048576, got \"8GB\"");
  EXPECT_EQ(ParseByteSize("", "--memory").status().message(),
            "--memory: must be a byte count such as 8GiB, 512MiB or 1048576, got \"\"");
  EXPECT_EQ(ParseByteSize("0", "--memory").status().message(), "--memory: must be between 1 B and 1 PiB, got \"0\"");
  EXPECT_EQ(ParseByteSize("2048TiB", "--memory").status().message(),
            "--memory: must be between 1 B and 1 PiB, got \"2048TiB\"");
}

}  // namespace
}  // namespace pipecoord
