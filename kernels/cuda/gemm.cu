#include <cublasLt.h>

#include <compare>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "kernels/cuda/column_major_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"

namespace pipecoord::kernels::cuda {
namespace {

// OK for CUBLAS_STATUS_SUCCESS; otherwise "<what>: <status name> (<description>)".
Status CublasStatus(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  std::string message =
      what + ": " + cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) + ")";
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return ResourceExhausted(std::move(message));
  return Internal(std::move(message));
}

const char* TypeName(cudaDataType_t type) { return type == CUDA_R_16BF ? "bf16" : "f32"; }

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address.
// cuBLASLt may pick an algorithm that needs 256-byte aligned buffers unless told otherwise, and
// a buffer carved out of a larger allocation can be less aligned than cudaMalloc's.
uint32_t Alignment(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t lowest_bit = address & (~address + 1);
  return lowest_bit == 0 || lowest_bit > 256 ? 256u : static_cast<uint32_t>(lowest_bit);
}

// Everything the descriptors and the algorithm choice depend on.
struct PlanKey {
  LinearStep step = LinearStep::kForward;
  cudaDataType_t input_type = CUDA_R_32F;   // A and B
  cudaDataType_t output_type = CUDA_R_32F;  // C and D
  int64_t n = 0, in = 0, out = 0;
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  bool tf32 = false;

  auto operator<=>(const PlanKey&) const = default;
};

// "B dx = dy w (bf16 -> bf16, n=2048 in=4096 out=11008)".
std::string Describe(const PlanKey& key) {
  return std::string(LinearStepName(key.step)) + " (" + TypeName(key.input_type) + " -> " +
         TypeName(key.output_type) + ", n=" + std::to_string(key.n) +
         " in=" + std::to_string(key.in) + " out=" + std::to_string(key.out) + ")";
}

// The descriptors and algorithm of one shape; destroys what it holds.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;
  cublasLtMatrixLayout_t b = nullptr;
  cublasLtMatrixLayout_t c = nullptr;  // also D's layout: D is written in place of C
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

class Preference {
 public:
  Preference() = default;
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  ~Preference() {
    if (pref_ != nullptr) cublasLtMatmulPreferenceDestroy(pref_);
  }
  cublasLtMatmulPreference_t* out() { return &pref_; }
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  cublasLtMatmulPreference_t pref_ = nullptr;
};

template <typename V>
Status SetPreference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                     V value, const char* name, const std::string& what) {
  return CublasStatus(
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
      std::string("cublasLtMatmulPreferenceSetAttribute(") + name + ") for " + what);
}

Status CheckDims(const cpu::LinearDims& d, const char* function) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  PIPECOORD_RETURN_IF_ERROR(CheckSize(function, "n", d.n, kMax));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(function, "in", d.in, kMax));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(function, "out", d.out, kMax));
  if (d.n == 0 || d.in == 0 || d.out == 0) {
    return InvalidArgument(std::string(function) +
                           ": n, in and out must be >= 1, got n=" + std::to_string(d.n) +
                           " in=" + std::to_string(d.in) + " out=" + std::to_string(d.out));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The `corrupt` and `flip` faults (cpu::TakeGemmFault, this thread's switch): one bit of one
// output element, a 1/8 relative change (bit 20 of a float, bit 4 of a bf16).
__global__ void FlipBitKernel(void* y, int64_t at, int bytes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  if (bytes == 4) {
    static_cast<uint32_t*>(y)[at] ^= 1u << 20;
  } else {
    static_cast<uint16_t*>(y)[at] ^= static_cast<uint16_t>(1u << 4);
  }
}

Status ApplyGemmFault(void* y, cudaDataType_t type, const cpu::LinearDims& d, LinearStep step, cudaStream_t stream) {
  const int64_t n = step == LinearStep::kBackwardWeight ? d.out * d.in : d.n * d.out;
  const int64_t at = cpu::TakeGemmFault(n);
  if (at < 0) return Status::Ok();
  FlipBitKernel<<<1, 32, 0, stream>>>(y, at, type == CUDA_R_32F ? 4 : 2);
  return CudaStatus(cudaGetLastError(), "FlipBitKernel (an injected GEMM fault)");
}

}  // namespace

struct GemmContext::Impl {
  GemmOptions options;
  int device = -1;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  ~Impl() {
    plans.clear();
    // Queued matmuls may still use the workspace; errors here have no one to report to.
    if (workspace != nullptr) {
      cudaStreamSynchronize(options.stream);
      cudaFree(workspace);
    }
    if (handle != nullptr) cublasLtDestroy(handle);
  }

  Result<const Plan*> FindOrMakePlan(const PlanKey& key);

  // D = alpha op(A) op(B) + beta C with A the step's second input, B its first, C = D = out.
  Status Run(LinearStep step, cudaDataType_t input_type, cudaDataType_t output_type,
             const void* first, const void* second, void* out, const cpu::LinearDims& d, float beta,
             const char* function);
};

Result<const Plan*> GemmContext::Impl::FindOrMakePlan(const PlanKey& key) {
  auto it = plans.find(key);
  if (it != plans.end()) return static_cast<const Plan*>(it->second.get());

  const std::string what = Describe(key);
  const ColumnMajorGemm g = PlanColumnMajorGemm(key.step, cpu::LinearDims{key.n, key.in, key.out});
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute =
      key.tf32 && key.input_type == CUDA_R_32F ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  PIPECOORD_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F),
                                         "cublasLtMatmulDescCreate for " + what));
  const cublasOperation_t transa = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transb = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  PIPECOORD_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                                  sizeof(transa)),
                   "cublasLtMatmulDescSetAttribute(TRANSA) for " + what));
  PIPECOORD_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                                  sizeof(transb)),
                   "cublasLtMatmulDescSetAttribute(TRANSB) for " + what));
  auto make_layout = [&](cublasLtMatrixLayout_t* layout, cudaDataType_t type, const StoredMatrix& m,
                         const char* name) {
    return CublasStatus(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(m.rows),
                                                   static_cast<uint64_t>(m.cols), m.ld),
                        std::string("cublasLtMatrixLayoutCreate(") + name + ") for " + what);
  };
  PIPECOORD_RETURN_IF_ERROR(make_layout(&plan->a, key.input_type, g.a, "A"));
  PIPECOORD_RETURN_IF_ERROR(make_layout(&plan->b, key.input_type, g.b, "B"));
  PIPECOORD_RETURN_IF_ERROR(make_layout(&plan->c, key.output_type, g.c, "C/D"));

  Preference pref;
  PIPECOORD_RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(pref.out()),
                                         "cublasLtMatmulPreferenceCreate for " + what));
  PIPECOORD_RETURN_IF_ERROR(SetPreference(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                          static_cast<uint64_t>(options.workspace_bytes),
                                          "MAX_WORKSPACE_BYTES", what));
  PIPECOORD_RETURN_IF_ERROR(SetPreference(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                          key.align_a, "MIN_ALIGNMENT_A_BYTES", what));
  PIPECOORD_RETURN_IF_ERROR(SetPreference(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                          key.align_b, "MIN_ALIGNMENT_B_BYTES", what));
  PIPECOORD_RETURN_IF_ERROR(SetPreference(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                          key.align_c, "MIN_ALIGNMENT_C_BYTES", what));
  PIPECOORD_RETURN_IF_ERROR(SetPreference(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                          key.align_c, "MIN_ALIGNMENT_D_BYTES", what));

  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  PIPECOORD_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->c,
                                                  plan->c, pref.get(), 1, &result, &returned),
                   "cublasLtMatmulAlgoGetHeuristic for " + what));
  if (returned < 1) {
    return Unimplemented("cublasLtMatmulAlgoGetHeuristic for " + what +
                         ": no algorithm for this shape and alignment (A " +
                         std::to_string(key.align_a) + " B " + std::to_string(key.align_b) + " C " +
                         std::to_string(key.align_c) + " bytes)");
  }
  PIPECOORD_RETURN_IF_ERROR(
      CublasStatus(result.state, "cublasLtMatmulAlgoGetHeuristic's result for " + what));
  plan->algo = result.algo;
  const Plan* made = plan.get();
  plans.emplace(key, std::move(plan));
  return made;
}

Status GemmContext::Impl::Run(LinearStep step, cudaDataType_t input_type,
                              cudaDataType_t output_type, const void* first, const void* second,
                              void* out, const cpu::LinearDims& d, float beta,
                              const char* function) {
  PIPECOORD_RETURN_IF_ERROR(CheckDims(d, function));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(function, "first input", first));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(function, "second input", second));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(function, "output", out));
  int current = -1;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  if (current != device) {
    return FailedPrecondition(std::string(function) + ": the GemmContext was made on device " +
                              std::to_string(device) + " but the current device is " +
                              std::to_string(current));
  }
  PlanKey key;
  key.step = step;
  key.input_type = input_type;
  key.output_type = output_type;
  key.n = d.n;
  key.in = d.in;
  key.out = d.out;
  key.align_a = Alignment(second);
  key.align_b = Alignment(first);
  key.align_c = Alignment(out);
  key.tf32 = options.allow_tf32;
  auto plan = FindOrMakePlan(key);
  if (!plan.ok()) return plan.status();
  const Plan& p = **plan;
  const float alpha = 1.0f;
  return CublasStatus(
      cublasLtMatmul(handle, p.desc, &alpha, second, p.a, first, p.b, &beta, out, p.c, out, p.c,
                     &p.algo, workspace, options.workspace_bytes, options.stream),
      "cublasLtMatmul for " + Describe(key));
}

GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;

Result<std::unique_ptr<GemmContext>> GemmContext::Create(const GemmOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaGetDevice(&impl->device));
  PIPECOORD_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&impl->handle), "cublasLtCreate"));
  if (options.workspace_bytes > 0) {
    PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&impl->workspace, options.workspace_bytes),
                                         "cudaMalloc(" + std::to_string(options.workspace_bytes) +
                                             " bytes) for the cuBLASLt workspace"));
  }
  return std::unique_ptr<GemmContext>(new GemmContext(std::move(impl)));
}

size_t GemmContext::cached_plans() const { return impl_->plans.size(); }

cudaStream_t GemmContext::stream() const { return impl_->options.stream; }

Status GemmContext::Forward(const float* x, const float* w, float* y, const cpu::LinearDims& d) {
  PIPECOORD_RETURN_IF_ERROR(impl_->Run(LinearStep::kForward, CUDA_R_32F, CUDA_R_32F, x, w, y, d, 0.0f,
                                       "GemmContext::Forward"));
  return ApplyGemmFault(y, CUDA_R_32F, d, LinearStep::kForward, impl_->options.stream);
}

Status GemmContext::Forward(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                            const cpu::LinearDims& d) {
  PIPECOORD_RETURN_IF_ERROR(impl_->Run(LinearStep::kForward, CUDA_R_16BF, CUDA_R_16BF, x, w, y, d, 0.0f,
                                       "GemmContext::Forward"));
  return ApplyGemmFault(y, CUDA_R_16BF, d, LinearStep::kForward, impl_->options.stream);
}

Status GemmContext::BackwardInput(const float* dy, const float* w, float* dx,
                                  const cpu::LinearDims& d, bool accumulate) {
  return impl_->Run(LinearStep::kBackwardInput, CUDA_R_32F, CUDA_R_32F, dy, w, dx, d,
                    accumulate ? 1.0f : 0.0f, "GemmContext::BackwardInput");
}

Status GemmContext::BackwardInput(const __nv_bfloat16* dy, const __nv_bfloat16* w,
                                  __nv_bfloat16* dx, const cpu::LinearDims& d, bool accumulate) {
  return impl_->Run(LinearStep::kBackwardInput, CUDA_R_16BF, CUDA_R_16BF, dy, w, dx, d,
                    accumulate ? 1.0f : 0.0f, "GemmContext::BackwardInput");
}

Status GemmContext::BackwardWeight(const float* dy, const float* x, float* dw,
                                   const cpu::LinearDims& d) {
  PIPECOORD_RETURN_IF_ERROR(impl_->Run(LinearStep::kBackwardWeight, CUDA_R_32F, CUDA_R_32F, dy, x, dw, d, 1.0f,
                                       "GemmContext::BackwardWeight"));
  return ApplyGemmFault(dw, CUDA_R_32F, d, LinearStep::kBackwardWeight, impl_->options.stream);
}

Status GemmContext::BackwardWeight(const __nv_bfloat16* dy, const __nv_bfloat16* x, float* dw,
                                   const cpu::LinearDims& d) {
  PIPECOORD_RETURN_IF_ERROR(impl_->Run(LinearStep::kBackwardWeight, CUDA_R_16BF, CUDA_R_32F, dy, x, dw, d, 1.0f,
                                       "GemmContext::BackwardWeight"));
  return ApplyGemmFault(dw, CUDA_R_32F, d, LinearStep::kBackwardWeight, impl_->options.stream);
}

}  // namespace pipecoord::kernels::cuda
