// Device discovery and a launch self-test. Compiled by nvcc (see //tools:cuda.bzl).
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "kernels/device.h"

namespace pipecoord::kernels {
namespace {

__global__ void FillIota(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

std::string CudaError(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ")";
}

}  // namespace

bool MeansNoDevice(int cuda_error, int driver_version) {
  if (cuda_error == cudaErrorNoDevice) return true;
  return cuda_error == cudaErrorInsufficientDriver && driver_version == 0;
}

Result<std::vector<DeviceInfo>> QueryDevices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls report their own
    const int driver = CudaDriverVersion();
    if (MeansNoDevice(err, driver)) return Unavailable("no CUDA device: " + CudaError(err));
    return Internal("CUDA runtime: " + CudaError(err) + " (driver CUDA version " + std::to_string(driver) +
                    ", runtime " + std::to_string(CudaRuntimeVersion()) + ")");
  }
  if (count == 0) return Unavailable("no CUDA device: the runtime reports 0 devices");
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) return Internal("device " + std::to_string(i) + ": " + CudaError(err));
    devices.push_back(DeviceInfo{i, prop.name, static_cast<uint64_t>(prop.totalGlobalMem),
                                 prop.major, prop.minor});
  }
  return devices;
}

Status RunSelfTest(int device) {
  constexpr int kN = 1000;
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) return Internal("cudaSetDevice: " + CudaError(err));
  int* d = nullptr;
  err = cudaMalloc(&d, kN * sizeof(int));
  if (err != cudaSuccess) return Internal("cudaMalloc: " + CudaError(err));
  cudaMemset(d, 0xFF, kN * sizeof(int));  // poison: an unwritten element fails the check
  FillIota<<<(kN + 255) / 256, 256>>>(d, kN);
  int host[kN];
  err = cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (err != cudaSuccess) return Internal("self-test kernel: " + CudaError(err));
  for (int i = 0; i < kN; ++i) {
    if (host[i] != 3 * i + 1) {
      return Internal("self-test kernel wrote " + std::to_string(host[i]) + " at " +
                      std::to_string(i) + ", expected " + std::to_string(3 * i + 1));
    }
  }
  return Status::Ok();
}

int NcclVersion() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
}

int CudaDriverVersion() {
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess) return 0;
  return version;
}

int CudaRuntimeVersion() {
  int version = 0;
  cudaRuntimeGetVersion(&version);
  return version;
}

}  // namespace pipecoord::kernels
