// RoPE kernels: one thread per (token, head, pair), grid-stride.
#include "kernels/cuda/rotary.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::FromDouble;
using device::GlobalThread;
using device::GridBlocks;
using device::GridThreads;
using device::ToFloat;

constexpr int kThreads = 256;

__global__ void BuildRopeTableKernel(double* cos_out, double* sin_out, int64_t seq,
                                     int64_t head_dim, double base) {
  const int64_t half = head_dim / 2;
  for (int64_t k = GlobalThread(); k < seq * half; k += GridThreads()) {
    const int64_t p = k / half;
    const int64_t i = k % half;
    const double angle = static_cast<double>(p) *
                         pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    cos_out[k] = cos(angle);
    sin_out[k] = sin(angle);
  }
}

// Pair k covers elements 2k and 2k + 1 of the flat [batch, seq, heads, head_dim] tensor (a head
// is head_dim / 2 consecutive pairs), so its position is (k / (half * heads)) % seq. sign +1
// rotates by the angle, -1 by minus the angle. x and y may be the same buffer: each thread
// reads its pair before writing it.
template <typename T>
__global__ void RotateKernel(const T* x, T* y, const double* __restrict__ cos_table,
                             const double* __restrict__ sin_table, int64_t pairs, int64_t half,
                             int64_t heads, int64_t seq, double sign) {
  for (int64_t k = GlobalThread(); k < pairs; k += GridThreads()) {
    const int64_t i = k % half;
    const int64_t p = (k / (half * heads)) % seq;
    const double c = cos_table[p * half + i];
    const double s = sign * sin_table[p * half + i];
    const double x0 = ToFloat(x[2 * k]);
    const double x1 = ToFloat(x[2 * k + 1]);
    y[2 * k] = FromDouble<T>(x0 * c - x1 * s);
    y[2 * k + 1] = FromDouble<T>(x0 * s + x1 * c);
  }
}

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
