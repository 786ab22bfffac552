// On a GPU machine: every device is described and runs our nvcc-built kernel. Without one: the
// reason is reported and the GPU part is skipped (not passed silently).
#include "kernels/device.h"

#include <gtest/gtest.h>

namespace pipecoord::kernels {
namespace {

TEST(DeviceTest, NcclAndRuntimeAnswerWithoutAGpu) {
  EXPECT_GE(NcclVersion(), 22800);        // NCCL 2.28 or newer is linked
  EXPECT_GE(CudaRuntimeVersion(), 12000);  // built against CUDA 12+
}

// Skips only for "there is nothing to run on"; every other CUDA error fails a GPU test.
TEST(DeviceTest, OnlyNoDeviceOrNoDriverMeansSkip) {
  EXPECT_TRUE(MeansNoDevice(100, 13000));  // cudaErrorNoDevice
  EXPECT_TRUE(MeansNoDevice(35, 0));       // cudaErrorInsufficientDriver, no driver loaded
  EXPECT_FALSE(MeansNoDevice(35, 12040));  // a driver older than the toolkit: a real failure
  EXPECT_FALSE(MeansNoDevice(2, 13000));   // cudaErrorMemoryAllocation
  EXPECT_FALSE(MeansNoDevice(999, 0));     // cudaErrorUnknown
}

TEST(DeviceTest, DevicesRunTheSelfTestKernel) {
  auto devices = QueryDevices();
  if (!devices.ok()) {
    ASSERT_EQ(devices.status().code(), Code::kUnavailable) << devices.status().ToString();
    ASSERT_EQ(devices.status().message().rfind("no CUDA device: ", 0), 0u);
    GTEST_SKIP() << devices.status().message();
  }
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo& d : *devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_memory_bytes, 0u);
    EXPECT_GE(d.compute_capability_major, 8) << "built for sm_80 and sm_90";
    EXPECT_TRUE(RunSelfTest(d.index).ok()) << RunSelfTest(d.index).ToString();
  }
}

}  // namespace
}  // namespace pipecoord::kernels
