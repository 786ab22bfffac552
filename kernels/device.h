// What CUDA devices this process can use, or why it can use none.
#ifndef PIPECOORD_KERNELS_DEVICE_H_
#define PIPECOORD_KERNELS_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::kernels {

struct DeviceInfo {
  int index = 0;
  std::string name;
  uint64_t total_memory_bytes = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
};

// The visible CUDA devices. Never fails hard: with no usable device (no driver, a driver older
// than the toolkit, no GPU) it returns UNAVAILABLE with "no CUDA device: <the runtime's reason>".
Result<std::vector<DeviceInfo>> QueryDevices();

// Launches a tiny kernel on `device` and checks what it wrote, proving that the code nvcc built
// for this binary runs on that device.
Status RunSelfTest(int device);

// NCCL's version as an integer (e.g. 22809 for 2.28.9). NCCL answers without a GPU.
int NcclVersion();

// The CUDA runtime version this binary was built against (e.g. 13000).
int CudaRuntimeVersion();

}  // namespace pipecoord::kernels

#endif  // PIPECOORD_KERNELS_DEVICE_H_
