// Prints the CUDA devices this machine offers, or why there are none. Exit code 0 with devices
// that pass the self-test, or with none at all (a normal state for CPU-only machines); 1 on any
// other CUDA error or a failed self-test.
#include <cstdio>

#include "kernels/device.h"

int main() {
  using namespace pipecoord::kernels;
  int rt = CudaRuntimeVersion();
  int nccl = NcclVersion();
  std::printf("CUDA runtime %d.%d, NCCL %d.%d.%d\n", rt / 1000, (rt % 1000) / 10, nccl / 10000,
              (nccl % 10000) / 100, nccl % 100);
  auto devices = QueryDevices();
  if (!devices.ok()) {
    std::printf("%s\n", devices.status().message().c_str());
    return devices.status().code() == pipecoord::Code::kUnavailable ? 0 : 1;
  }
  int rc = 0;
  for (const DeviceInfo& d : *devices) {
    std::printf("device %d: %s, %.1f GiB, compute capability %d.%d\n", d.index, d.name.c_str(),
                d.total_memory_bytes / (1024.0 * 1024 * 1024), d.compute_capability_major,
                d.compute_capability_minor);
    auto st = RunSelfTest(d.index);
    std::printf("  self-test: %s\n", st.ToString().c_str());
    if (!st.ok()) rc = 1;
  }
  return rc;
}
