// Y = X W^T on the GPU with cpu::LinearForward's exact arithmetic (kernels/cpu/linear.h): each
// output is sum over i = 0, 1, ... of x[t, i] w[o, i] in double, in that order, rounded once to
// float. A float times a float is exact in double, so whether nvcc fuses the multiply into the
// add changes nothing: the result equals the CPU's bit for bit. One thread per output and no
// tensor cores: slow, meant for known-answer probes and tests, not for training (that is the
// cuBLAS GEMM's job).
//
// Layouts (row-major, device memory): x [n, in], w [out, in], y [n, out].
#ifndef PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_H_
#define PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace pipecoord::kernels::cuda {

// F: overwrites y.
Status ExactLinearForward(const float* x, const float* w, float* y, int64_t n, int64_t in,
                          int64_t out, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_EXACT_LINEAR_H_
