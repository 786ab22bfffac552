// attention.h's CheckFlashAttentionDims: host code (g++), shared by the CUDA launchers
// (attention.cu) and worker/cuda's host double, so both refuse the same shapes with the same words.
#include <cstdint>
#include <string>

#include "kernels/cuda/attention.h"

namespace pipecoord::kernels::cuda {
namespace {

Status CheckRange(const char* name, int64_t value, int64_t limit) {
  if (value >= 1 && value <= limit) return Status::Ok();
  return InvalidArgument(std::string("flash attention: ") + name + " must be in [1, " +
                         std::to_string(limit) + "], got " + std::to_string(value));
}

}  // namespace

Status CheckFlashAttentionDims(const cpu::AttentionDims& d) {
  PIPECOORD_RETURN_IF_ERROR(CheckRange("batch", d.batch, kFlashMaxBatch));
  PIPECOORD_RETURN_IF_ERROR(CheckRange("seq", d.seq, kFlashMaxSeq));
  PIPECOORD_RETURN_IF_ERROR(CheckRange("heads", d.heads, kFlashMaxHeads));
  PIPECOORD_RETURN_IF_ERROR(CheckRange("head_dim", d.head_dim, kFlashMaxHeadDim));
  if (d.kv_heads < 0 || d.kv() > d.heads || d.heads % d.kv() != 0) {
    return InvalidArgument("flash attention: kv_heads must divide heads (" + std::to_string(d.heads) +
                           ") or be 0 (heads), got " + std::to_string(d.kv_heads));
  }
  if (d.window < 0) {
    return InvalidArgument("flash attention: window must be >= 0 (0: none), got " + std::to_string(d.window));
  }
  return Status::Ok();
}

}  // namespace pipecoord::kernels::cuda
