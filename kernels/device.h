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

// The visible CUDA devices. UNAVAILABLE with "no CUDA device: <the runtime's reason>" only when
// there is none to use: no GPU (cudaErrorNoDevice, or 0 devices) or no driver loaded at all
// (cudaErrorInsufficientDriver while the driver version is 0). Any other CUDA error (a driver
// older than the toolkit, a broken device, ...) is INTERNAL: a GPU test fails on it, never skips.
Result<std::vector<DeviceInfo>> QueryDevices();

// The rule above on a cudaError_t value (cudaErrorNoDevice is 100, cudaErrorInsufficientDriver
// 35) and cudaDriverGetVersion's answer (0: no driver).
bool MeansNoDevice(int cuda_error, int driver_version);

// Launches a tiny kernel on `device` and checks what it wrote, proving that the code nvcc built
// for this binary runs on that device.
Status RunSelfTest(int device);

// NCCL's version as an integer (e.g. 22809 for 2.28.9). NCCL answers without a GPU.
int NcclVersion();

// The CUDA runtime version this binary was built against (e.g. 13000).
int CudaRuntimeVersion();

// The installed driver's CUDA version (e.g. 13000); 0 when no driver is loaded.
int CudaDriverVersion();

}  // namespace pipecoord::kernels

#endif  // PIPECOORD_KERNELS_DEVICE_H_
