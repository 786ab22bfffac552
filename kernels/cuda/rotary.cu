// RoPE launchers: argument checks, then the kernels of rotary_kernels.h.
#include "kernels/cuda/rotary.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/rotary_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::GridBlocks;
using rotary::BuildRopeTableKernel;
using rotary::kThreads;
using rotary::RotateKernel;

Status CheckTable(const char* fn, const DeviceRopeTable& t) {
  if (t.head_dim < 2 || t.head_dim % 2 != 0) {
    return InvalidArgument(std::string(fn) + ": table head_dim must be even and >= 2, got " +
                           std::to_string(t.head_dim));
  }
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "table seq", t.seq, int64_t{1} << 40));
  return Status::Ok();
}

template <typename T>
Status Rotate(const char* fn, const T* x, T* y, const DeviceRopeTable& table, int64_t batch,
              int64_t heads, double sign, cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckTable(fn, table));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "batch", batch, int64_t{1} << 40));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "heads", heads, int64_t{1} << 20));
  const int64_t half = table.head_dim / 2;
  const int64_t pairs = batch * table.seq * heads * half;
  if (pairs == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "input", x));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "output", y));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "table.cos", table.cos));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "table.sin", table.sin));
  RotateKernel<T><<<GridBlocks(pairs, kThreads), kThreads, 0, stream>>>(
      x, y, table.cos, table.sin, pairs, half, heads, table.seq, sign);
  return LaunchStatus("RotateKernel");
}

}  // namespace

Status BuildRopeTable(double* cos, double* sin, int64_t seq, int64_t head_dim, double base,
                      cudaStream_t stream) {
  constexpr const char* kFn = "BuildRopeTable";
  PIPECOORD_RETURN_IF_ERROR(CheckTable(kFn, DeviceRopeTable{cos, sin, seq, head_dim}));
  if (seq == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "cos", cos));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "sin", sin));
  const int64_t entries = seq * (head_dim / 2);
  BuildRopeTableKernel<<<GridBlocks(entries, kThreads), kThreads, 0, stream>>>(cos, sin, seq,
                                                                               head_dim, base);
  return LaunchStatus("BuildRopeTableKernel");
}

Status RopeForward(const float* x, float* y, const DeviceRopeTable& table, int64_t batch,
                   int64_t heads, cudaStream_t stream) {
  return Rotate("RopeForward", x, y, table, batch, heads, 1.0, stream);
}
Status RopeForward(const __nv_bfloat16* x, __nv_bfloat16* y, const DeviceRopeTable& table,
                   int64_t batch, int64_t heads, cudaStream_t stream) {
  return Rotate("RopeForward", x, y, table, batch, heads, 1.0, stream);
}

Status RopeBackward(const float* dy, float* dx, const DeviceRopeTable& table, int64_t batch,
                    int64_t heads, cudaStream_t stream) {
  return Rotate("RopeBackward", dy, dx, table, batch, heads, -1.0, stream);
}
Status RopeBackward(const __nv_bfloat16* dy, __nv_bfloat16* dx, const DeviceRopeTable& table,
                    int64_t batch, int64_t heads, cudaStream_t stream) {
  return Rotate("RopeBackward", dy, dx, table, batch, heads, -1.0, stream);
}

}  // namespace pipecoord::kernels::cuda
