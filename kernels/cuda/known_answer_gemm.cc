#include "kernels/cuda/known_answer_gemm.h"

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cuda/checksum.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/exact_linear.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

// The probe sizes a job may ask for: n * n floats of inputs drawn on one host core.
constexpr int kMaxProbeSize = 4096;

Status CheckProbeSize(int n) {
  if (n >= 1 && n <= kMaxProbeSize) return Status::Ok();
  return InvalidArgument("known-answer GEMM: n must be in [1, " + std::to_string(kMaxProbeSize) +
                         "], got " + std::to_string(n));
}

}  // namespace

Status KnownAnswerGemm(uint64_t seed, int n, float* y, cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckProbeSize(n));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer("KnownAnswerGemm", "y", y));
  const int64_t nn = static_cast<int64_t>(n) * n;
  // cpu::KnownAnswerGemm's inputs (integers: exact in fp32 in any order), X then W, one buffer.
  const cpu::ProbeInputs in = cpu::MakeProbeInputs(seed, cpu::ProbeShape{n, n, n});
  std::vector<float> xw(in.x);
  xw.insert(xw.end(), in.w.begin(), in.w.end());

  StreamScratch inputs(stream);
  const size_t bytes = xw.size() * sizeof(float);
  PIPECOORD_RETURN_IF_ERROR(inputs.Allocate(bytes));
  float* d_xw = reinterpret_cast<float*>(inputs.get());
  // xw is pageable and dies with this call: wait until the copy has read it.
  PIPECOORD_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d_xw, xw.data(), bytes, cudaMemcpyHostToDevice, stream));
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  PIPECOORD_RETURN_IF_ERROR(ExactLinearForward(d_xw, d_xw + nn, y, n, n, n, stream));
  return inputs.Free();
}

Result<uint64_t> KnownAnswerChecksum(uint64_t seed, int n, cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckProbeSize(n));
  StreamScratch output(stream);
  PIPECOORD_RETURN_IF_ERROR(
      output.Allocate(static_cast<size_t>(n) * static_cast<size_t>(n) * sizeof(float)));
  float* y = reinterpret_cast<float*>(output.get());
  PIPECOORD_RETURN_IF_ERROR(KnownAnswerGemm(seed, n, y, stream));
  Result<uint64_t> hash = HashFloatsOnHost(y, static_cast<int64_t>(n) * n, stream);
  PIPECOORD_RETURN_IF_ERROR(output.Free());
  return hash;
}

}  // namespace pipecoord::kernels::cuda
