// The RoPE kernels (device code) behind rotary.h; rotary.cu launches them with kThreads per
// block on grid-stride loops: the table builder over (position, pair), the rotation over pairs.
//
// nvcc builds it through rotary.cu; g++ builds it under cuda_emulation.h for
// rotary_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_ROTARY_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_ROTARY_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::rotary {

using device::FromDouble;
using device::GlobalThread;
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

}  // namespace pipecoord::kernels::cuda::rotary

#endif  // PIPECOORD_KERNELS_CUDA_ROTARY_KERNELS_H_
