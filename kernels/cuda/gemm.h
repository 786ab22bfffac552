// The linear layer on a CUDA device through cuBLASLt: the twin of kernels/cpu/linear.h with the
// same row-major layouts (X [n, in], W [out, in], Y [n, out]) and the same split into three
// calls, so a zero-bubble schedule can run W later to fill a pipeline bubble:
//   F: y = x w^T            B: dx = dy w (or dx += dy w)            W: dw += dy^T x
//
// Dtypes: float in and out, computed in fp32 (no TF32 unless GemmOptions::allow_tf32); or bf16
// (__nv_bfloat16) inputs with fp32 accumulation, bf16 y and dx, and for W an fp32 dw (the
// gradient buffer of fp32 master weights), to which dy^T x is added in fp32.
//
// A GemmContext owns the cuBLASLt handle, a workspace and, per shape, the matmul and layout
// descriptors and the chosen algorithm, made on the first call and reused by every later call
// of that shape, so a training step does no descriptor set-up and no heuristic query.
//
// All pointers are device pointers on the context's device; outputs must not alias inputs.
// Every call is queued on the context's stream and returns once queued; an error names the
// cuBLASLt (or CUDA) call, the step and the shape.
#ifndef PIPECOORD_KERNELS_CUDA_GEMM_H_
#define PIPECOORD_KERNELS_CUDA_GEMM_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/bf16.h"  // __nv_bfloat16, declared for g++-built callers

namespace pipecoord::kernels::cuda {

struct GemmOptions {
  // Every call of the context runs on this stream, in order: the calls share one workspace, so
  // two streams need two contexts. nullptr is the legacy default stream.
  cudaStream_t stream = nullptr;
  // cuBLAS's recommendation for Hopper; larger shapes may pick faster algorithms with more.
  size_t workspace_bytes = size_t{32} << 20;
  // Lets float calls use TF32 tensor cores (inputs rounded to 10-bit mantissas): faster, less
  // exact. Off by default, so float matches the CPU twin to fp32 rounding.
  bool allow_tf32 = false;
};

class GemmContext {
 public:
  // Creates the handle and allocates the workspace on the current device. Not thread-safe:
  // use one context per stream, from one thread at a time.
  static Result<std::unique_ptr<GemmContext>> Create(const GemmOptions& options = {});
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  // Forward and BackwardWeight honour the `corrupt` / `flip` faults of this thread
  // (cpu::TakeGemmFault): one bit of one output element flips after the product.
  // F: y = x w^T. Overwrites y [n, out] (its old contents are never read).
  Status Forward(const float* x, const float* w, float* y, const cpu::LinearDims& d);
  Status Forward(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                 const cpu::LinearDims& d);

  // B: dx = dy w, or dx += dy w when accumulate (the sum is formed in fp32, then rounded to dx's
  // dtype once). dy [n, out], dx [n, in].
  Status BackwardInput(const float* dy, const float* w, float* dx, const cpu::LinearDims& d,
                       bool accumulate);
  Status BackwardInput(const __nv_bfloat16* dy, const __nv_bfloat16* w, __nv_bfloat16* dx,
                       const cpu::LinearDims& d, bool accumulate);

  // W: dw += dy^T x, dw [out, in] in fp32 (accumulates, so micro-batches add up).
  Status BackwardWeight(const float* dy, const float* x, float* dw, const cpu::LinearDims& d);
  Status BackwardWeight(const __nv_bfloat16* dy, const __nv_bfloat16* x, float* dw,
                        const cpu::LinearDims& d);

  // How many shapes have descriptors cached (a shape here: step, dtypes, dims and the pointers'
  // alignments, which decide which algorithms may run). For tests and diagnostics.
  size_t cached_plans() const;

  cudaStream_t stream() const;

 private:
  struct Impl;
  explicit GemmContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_GEMM_H_
