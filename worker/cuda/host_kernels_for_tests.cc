// A test double of the GPU for the host-emulated tests of worker/cuda (not a backend): every
// launcher the CUDA stage model calls (kernels/cuda's layers, GemmContext, the AdamW step, this
// package's elementwise kernels) and CudaDevice, implemented on the CPU. f32 calls run the CPU
// twins themselves (kernels/cpu), so the fp32 model built on them must compute exactly what the
// CPU StageModel computes: a bit-for-bit check of how cuda_stage_model.cc wires the layers
// (which buffer feeds which call, dims, what B keeps for W, accumulation, loss scaling). bf16
// calls convert to float, run the twin and round the outputs to bf16: they check the bf16
// wiring (which buffers are bf16 and which fp32), not the GPU kernels' bf16 arithmetic.
//
// "Device" memory is host memory from a real CachingAllocator (kernels/caching_allocator.h,
// which is CUDA-free) whose tensors say MemoryKind::kCuda, so the pool's accounting is the real
// one. The stream is nullptr and every call runs at once.
//
// The CUDA runtime's event calls (CudaBackend's device timing), device-to-device copies (the
// all-reduce's chunks, device_gradients.cc) and error strings are stood in too, at the bottom:
// an event completes when it is recorded and a copy when it is queued (the stream runs every
// call at once), events stamped with the host's steady clock.
//
// Link this file INSTEAD of //worker/cuda's and //kernels/cuda's libraries and cudart (it
// defines their symbols); the gpu-tagged tests run the real ones on a GPU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/caching_allocator.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/checksum.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rotary.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/checksum.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rotary.h"
#include "kernels/cuda/swiglu.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/elementwise.h"

namespace pipecoord::kernels::cuda {
namespace {

using Bf = __nv_bfloat16;

// bf16 buffers as floats and back (the bits of __nv_bfloat16 are a uint16_t).
std::vector<float> In(const Bf* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  const auto* bits = reinterpret_cast<const uint16_t*>(p);
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16BitsToFloat(bits[i]);
  return out;
}
void Out(const std::vector<float>& v, Bf* p) {
  auto* bits = reinterpret_cast<uint16_t*>(p);
  for (size_t i = 0; i < v.size(); ++i) bits[i] = FloatToBf16Bits(v[i]);
}

cpu::RopeTable Table(const DeviceRopeTable& t) {
  cpu::RopeTable table;
  table.seq = t.seq;
  table.head_dim = t.head_dim;
  const size_t count = static_cast<size_t>(t.seq * t.head_dim / 2);
  table.cos.assign(t.cos, t.cos + count);
  table.sin.assign(t.sin, t.sin + count);
  return table;
}

// The per-row log-sum-exps the GPU forward saves (the model only carries them to B).
void WriteLse(const float* q, const float* k, float* lse, const cpu::AttentionDims& d) {
  const int64_t s = d.seq, hd = d.head_dim, stride = d.hidden(), kv_stride = d.kv_hidden();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < s; ++i) {
        double mx = -INFINITY;
        std::vector<double> score(static_cast<size_t>(i + 1));
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) {
            dot += static_cast<double>(q[(b * s + i) * stride + h * hd + c]) *
                   k[(b * s + j) * kv_stride + (h / d.group()) * hd + c];
          }
          score[j] = scale * dot;
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (double v : score) sum += std::exp(v - mx);
        lse[(b * d.heads + h) * s + i] = static_cast<float>(mx + std::log(sum));
      }
    }
  }
}

}  // namespace

// ---- attention: the CPU twin (probs recomputed in B from q and k) ----

// CheckFlashAttentionDims is the real one (//kernels/cuda:attention_limits).

Status FlashAttentionForward(const float* q, const float* k, const float* v, float* o, float* lse,
                             const cpu::AttentionDims& d, cudaStream_t) {
  PIPECOORD_RETURN_IF_ERROR(CheckFlashAttentionDims(d));
  std::vector<float> probs(static_cast<size_t>(d.probs_size()));
  cpu::AttentionForward(q, k, v, probs.data(), o, d);
  WriteLse(q, k, lse, d);
  return Status::Ok();
}

Status FlashAttentionForward(const Bf* q, const Bf* k, const Bf* v, Bf* o, float* lse,
                             const cpu::AttentionDims& d, cudaStream_t stream) {
  const int64_t n = d.batch * d.seq * d.hidden(), kv_n = d.batch * d.seq * d.kv_hidden();
  std::vector<float> qf = In(q, n), kf = In(k, kv_n), vf = In(v, kv_n), of(static_cast<size_t>(n));
  PIPECOORD_RETURN_IF_ERROR(FlashAttentionForward(qf.data(), kf.data(), vf.data(), of.data(), lse, d, stream));
  Out(of, o);
  return Status::Ok();
}

Status FlashAttentionBackward(const float* dout, const float* q, const float* k, const float* v,
                              const float*, const float*, float*, float* dq, float* dk, float* dv,
                              const cpu::AttentionDims& d, cudaStream_t) {
  PIPECOORD_RETURN_IF_ERROR(CheckFlashAttentionDims(d));
  const int64_t n = d.batch * d.seq * d.hidden();
  std::vector<float> probs(static_cast<size_t>(d.probs_size())), o(static_cast<size_t>(n));
  cpu::AttentionForward(q, k, v, probs.data(), o.data(), d);
  cpu::AttentionBackward(dout, q, k, v, probs.data(), dq, dk, dv, d);
  return Status::Ok();
}

Status FlashAttentionBackward(const Bf* dout, const Bf* q, const Bf* k, const Bf* v, const Bf* o,
                              const float* lse, float* delta, Bf* dq, Bf* dk, Bf* dv,
                              const cpu::AttentionDims& d, cudaStream_t stream) {
  const int64_t n = d.batch * d.seq * d.hidden(), kv_n = d.batch * d.seq * d.kv_hidden();
  std::vector<float> df = In(dout, n), qf = In(q, n), kf = In(k, kv_n), vf = In(v, kv_n), of = In(o, n);
  std::vector<float> dqf(static_cast<size_t>(n)), dkf(static_cast<size_t>(kv_n)), dvf(static_cast<size_t>(kv_n));
  PIPECOORD_RETURN_IF_ERROR(FlashAttentionBackward(df.data(), qf.data(), kf.data(), vf.data(), of.data(),
                                                   lse, delta, dqf.data(), dkf.data(), dvf.data(), d, stream));
  Out(dqf, dq);
  Out(dkf, dk);
  Out(dvf, dv);
  return Status::Ok();
}

// ---- cross-entropy ----

Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* loss_per_token, double* mean_loss, cudaStream_t) {
  if (loss_per_token != nullptr) return Unimplemented("host double: loss_per_token");
  if (mean_loss != nullptr) *mean_loss = cpu::CrossEntropyForward(logits, targets, n, vocab);
  return Status::Ok();
}

Status CrossEntropyForward(const Bf* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* loss_per_token, double* mean_loss, cudaStream_t stream) {
  const std::vector<float> l = In(logits, n * vocab);
  return CrossEntropyForward(l.data(), targets, n, vocab, loss_per_token, mean_loss, stream);
}

Status CrossEntropyBackward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            double dloss, float* dlogits, cudaStream_t) {
  // In place is allowed on the GPU: the twin reads a copy.
  const std::vector<float> l(logits, logits + n * vocab);
  cpu::CrossEntropyBackward(l.data(), targets, n, vocab, dloss, dlogits);
  return Status::Ok();
}

Status CrossEntropyBackward(const Bf* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            double dloss, Bf* dlogits, cudaStream_t stream) {
  const std::vector<float> l = In(logits, n * vocab);
  std::vector<float> dl(l.size());
  PIPECOORD_RETURN_IF_ERROR(CrossEntropyBackward(l.data(), targets, n, vocab, dloss, dl.data(), stream));
  Out(dl, dlogits);
  return Status::Ok();
}

// The vocabulary-parallel steps: the CPU's arithmetic of record (bf16 widened, the probabilities
// rounded back).
Status VocabParallelRowMax(const float* logits, int64_t n, int64_t vl, float* mine, cudaStream_t) {
  cpu::VocabParallelRowMax(logits, n, vl, mine);
  return Status::Ok();
}
Status VocabParallelRowMax(const Bf* logits, int64_t n, int64_t vl, float* mine, cudaStream_t) {
  const std::vector<float> l = In(logits, n * vl);
  cpu::VocabParallelRowMax(l.data(), n, vl, mine);
  return Status::Ok();
}
Status VocabParallelSums(const float* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t) {
  cpu::VocabParallelSums(logits, targets, n, vl, first, gathered_max, tp, row_max, sums);
  return Status::Ok();
}
Status VocabParallelSums(const Bf* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t) {
  const std::vector<float> l = In(logits, n * vl);
  cpu::VocabParallelSums(l.data(), targets, n, vl, first, gathered_max, tp, row_max, sums);
  return Status::Ok();
}
Status VocabParallelLossAndProbs(float* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t) {
  *mean_loss = cpu::VocabParallelLossAndProbs(logits, n, vl, first, targets, row_max, sums);
  return Status::Ok();
}
Status VocabParallelLossAndProbs(Bf* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t) {
  std::vector<float> l = In(logits, n * vl);
  *mean_loss = cpu::VocabParallelLossAndProbs(l.data(), n, vl, first, targets, row_max, sums);
  Out(l, logits);
  return Status::Ok();
}
Status VocabParallelDlogits(const float* probs, int64_t n, int64_t vl, double dloss, float* dlogits, cudaStream_t) {
  cpu::VocabParallelDlogits(probs, n, vl, dloss, dlogits);
  return Status::Ok();
}
Status VocabParallelDlogits(const Bf* probs, int64_t n, int64_t vl, double dloss, Bf* dlogits, cudaStream_t) {
  std::vector<float> p = In(probs, n * vl);
  cpu::VocabParallelDlogits(p.data(), n, vl, dloss, p.data());
  Out(p, dlogits);
  return Status::Ok();
}

// ---- embedding ----

// The CPU twin row by row; kOtherRankId gives zeros (the launchers' contract).
Status EmbeddingForward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim,
                        int64_t, cudaStream_t) {
  for (int64_t r = 0; r < n; ++r) {
    if (ids[r] == kOtherRankId) {
      std::fill(out + r * dim, out + (r + 1) * dim, 0.f);
    } else {
      cpu::EmbeddingForward(table, ids + r, out + r * dim, 1, dim);
    }
  }
  return Status::Ok();
}

Status EmbeddingForward(const Bf* table, const int32_t* ids, Bf* out, int64_t n, int64_t dim,
                        int64_t vocab, cudaStream_t) {
  const std::vector<float> t = In(table, vocab * dim);
  std::vector<float> o(static_cast<size_t>(n * dim));
  (void)EmbeddingForward(t.data(), ids, o.data(), n, dim, vocab, nullptr);
  Out(o, out);
  return Status::Ok();
}

Status EmbeddingBackwardWeight(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t dim, int64_t, cudaStream_t) {
  for (int64_t r = 0; r < n; ++r) {
    if (ids[r] != kOtherRankId) cpu::EmbeddingBackwardWeight(dout + r * dim, ids + r, dtable, 1, dim);
  }
  return Status::Ok();
}

Status EmbeddingBackwardWeight(const Bf* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t dim, int64_t, cudaStream_t) {
  const std::vector<float> d = In(dout, n * dim);
  (void)EmbeddingBackwardWeight(d.data(), ids, dtable, n, dim, 0, nullptr);
  return Status::Ok();
}

// ---- GEMMs ----

struct GemmContext::Impl {};

Result<std::unique_ptr<GemmContext>> GemmContext::Create(const GemmOptions&) {
  return std::unique_ptr<GemmContext>(new GemmContext(std::make_unique<Impl>()));
}
GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;

Status GemmContext::Forward(const float* x, const float* w, float* y, const cpu::LinearDims& d) {
  cpu::LinearForward(x, w, y, d);
  return Status::Ok();
}
Status GemmContext::Forward(const Bf* x, const Bf* w, Bf* y, const cpu::LinearDims& d) {
  const std::vector<float> xf = In(x, d.n * d.in), wf = In(w, d.out * d.in);
  std::vector<float> yf(static_cast<size_t>(d.n * d.out));
  cpu::LinearForward(xf.data(), wf.data(), yf.data(), d);
  Out(yf, y);
  return Status::Ok();
}
Status GemmContext::BackwardInput(const float* dy, const float* w, float* dx, const cpu::LinearDims& d,
                                  bool accumulate) {
  cpu::LinearBackwardInput(dy, w, dx, d, accumulate);
  return Status::Ok();
}
Status GemmContext::BackwardInput(const Bf* dy, const Bf* w, Bf* dx, const cpu::LinearDims& d, bool accumulate) {
  const std::vector<float> dyf = In(dy, d.n * d.out), wf = In(w, d.out * d.in);
  std::vector<float> dxf = accumulate ? In(dx, d.n * d.in) : std::vector<float>(static_cast<size_t>(d.n * d.in));
  cpu::LinearBackwardInput(dyf.data(), wf.data(), dxf.data(), d, accumulate);
  Out(dxf, dx);
  return Status::Ok();
}
// gemm.cu's injected fault on W's output (F's comes from the CPU twin, which asks the same switch).
void ApplyWeightGemmFault(float* dw, const cpu::LinearDims& d) {
  const int64_t at = cpu::TakeGemmFault(d.out * d.in);
  if (at < 0) return;
  uint32_t bits;
  std::memcpy(&bits, &dw[at], sizeof bits);
  bits ^= 1u << 20;
  std::memcpy(&dw[at], &bits, sizeof bits);
}
Status GemmContext::BackwardWeight(const float* dy, const float* x, float* dw, const cpu::LinearDims& d) {
  cpu::LinearBackwardWeight(dy, x, dw, d);
  ApplyWeightGemmFault(dw, d);
  return Status::Ok();
}
Status GemmContext::BackwardWeight(const Bf* dy, const Bf* x, float* dw, const cpu::LinearDims& d) {
  const std::vector<float> dyf = In(dy, d.n * d.out), xf = In(x, d.n * d.in);
  cpu::LinearBackwardWeight(dyf.data(), xf.data(), dw, d);
  ApplyWeightGemmFault(dw, d);
  return Status::Ok();
}

// ---- checksum.h: the hash (its definition's own CPU code; the slot is written, not added) ----

Status HashFloats(const float* x, int64_t n, uint64_t* hash, cudaStream_t) {
  *hash = cpu::HashFloats(x, n);
  return Status::Ok();
}

// ---- RMSNorm ----

Status RmsNormForward(const float* x, const float* g, float* y, float* rstd, int64_t n, int64_t h,
                      double eps, cudaStream_t) {
  cpu::RmsNormForward(x, g, y, rstd, n, h, eps);
  return Status::Ok();
}
Status RmsNormForward(const Bf* x, const Bf* g, Bf* y, float* rstd, int64_t n, int64_t h, double eps,
                      cudaStream_t) {
  const std::vector<float> xf = In(x, n * h), gf = In(g, h);
  std::vector<float> yf(static_cast<size_t>(n * h));
  cpu::RmsNormForward(xf.data(), gf.data(), yf.data(), rstd, n, h, eps);
  Out(yf, y);
  return Status::Ok();
}
Status RmsNormBackwardInput(const float* dy, const float* x, const float* g, const float* rstd,
                            float* dx, int64_t n, int64_t h, bool accumulate, cudaStream_t) {
  cpu::RmsNormBackwardInput(dy, x, g, rstd, dx, n, h, accumulate);
  return Status::Ok();
}
Status RmsNormBackwardInput(const Bf* dy, const Bf* x, const Bf* g, const float* rstd, Bf* dx,
                            int64_t n, int64_t h, bool accumulate, cudaStream_t) {
  const std::vector<float> dyf = In(dy, n * h), xf = In(x, n * h), gf = In(g, h);
  std::vector<float> dxf = accumulate ? In(dx, n * h) : std::vector<float>(static_cast<size_t>(n * h));
  cpu::RmsNormBackwardInput(dyf.data(), xf.data(), gf.data(), rstd, dxf.data(), n, h, accumulate);
  Out(dxf, dx);
  return Status::Ok();
}
Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, float* dg, int64_t n,
                             int64_t h, cudaStream_t) {
  cpu::RmsNormBackwardWeight(dy, x, rstd, dg, n, h);
  return Status::Ok();
}
Status RmsNormBackwardWeight(const Bf* dy, const Bf* x, const float* rstd, float* dg, int64_t n,
                             int64_t h, cudaStream_t) {
  const std::vector<float> dyf = In(dy, n * h), xf = In(x, n * h);
  cpu::RmsNormBackwardWeight(dyf.data(), xf.data(), rstd, dg, n, h);
  return Status::Ok();
}

// ---- RoPE (in place when y == x) ----

Status RopeForward(const float* x, float* y, const DeviceRopeTable& t, int64_t batch, int64_t heads,
                   cudaStream_t) {
  const int64_t n = batch * t.seq * heads * t.head_dim;
  if (y != x) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
  cpu::RopeForward(y, Table(t), batch, heads);
  return Status::Ok();
}
Status RopeForward(const Bf* x, Bf* y, const DeviceRopeTable& t, int64_t batch, int64_t heads, cudaStream_t) {
  std::vector<float> v = In(x, batch * t.seq * heads * t.head_dim);
  cpu::RopeForward(v.data(), Table(t), batch, heads);
  Out(v, y);
  return Status::Ok();
}
Status RopeBackward(const float* dy, float* dx, const DeviceRopeTable& t, int64_t batch, int64_t heads,
                    cudaStream_t) {
  const int64_t n = batch * t.seq * heads * t.head_dim;
  if (dx != dy) std::memcpy(dx, dy, static_cast<size_t>(n) * sizeof(float));
  cpu::RopeBackward(dx, Table(t), batch, heads);
  return Status::Ok();
}
Status RopeBackward(const Bf* dy, Bf* dx, const DeviceRopeTable& t, int64_t batch, int64_t heads, cudaStream_t) {
  std::vector<float> v = In(dy, batch * t.seq * heads * t.head_dim);
  cpu::RopeBackward(v.data(), Table(t), batch, heads);
  Out(v, dx);
  return Status::Ok();
}

// ---- SwiGLU ----

Status SwiGluForward(const float* gate, const float* up, float* z, int64_t n, cudaStream_t) {
  cpu::SwiGluForward(gate, up, z, n);
  return Status::Ok();
}
Status SwiGluForward(const Bf* gate, const Bf* up, Bf* z, int64_t n, cudaStream_t) {
  const std::vector<float> g = In(gate, n), u = In(up, n);
  std::vector<float> zf(static_cast<size_t>(n));
  cpu::SwiGluForward(g.data(), u.data(), zf.data(), n);
  Out(zf, z);
  return Status::Ok();
}
Status SwiGluBackward(const float* dz, const float* gate, const float* up, float* dgate, float* dup,
                      int64_t n, cudaStream_t) {
  cpu::SwiGluBackward(dz, gate, up, dgate, dup, n);
  return Status::Ok();
}
Status SwiGluBackward(const Bf* dz, const Bf* gate, const Bf* up, Bf* dgate, Bf* dup, int64_t n, cudaStream_t) {
  const std::vector<float> d = In(dz, n), g = In(gate, n), u = In(up, n);
  std::vector<float> dg(static_cast<size_t>(n)), du(static_cast<size_t>(n));
  cpu::SwiGluBackward(d.data(), g.data(), u.data(), dg.data(), du.data(), n);
  Out(dg, dgate);
  Out(du, dup);
  return Status::Ok();
}

// ---- AdamW: the CPU step per tensor, then the bf16 copy ----

Status MultiTensorAdamWStep(std::span<const AdamWTensor> tensors, const AdamWOptions& options,
                            int64_t step, cudaStream_t) {
  for (const AdamWTensor& t : tensors) {
    cpu::AdamWOptions o;
    o.lr = options.lr;
    o.beta1 = options.beta1;
    o.beta2 = options.beta2;
    o.eps = options.eps;
    o.weight_decay = t.weight_decay ? options.weight_decay : 0.0;
    cpu::AdamWStep(t.param, t.grad, t.m, t.v, t.n, o, step);
    if (t.param_bf16 != nullptr) Out(std::vector<float>(t.param, t.param + t.n), t.param_bf16);
  }
  return Status::Ok();
}

}  // namespace pipecoord::kernels::cuda

namespace pipecoord::worker::cuda {

// ---- elementwise.h ----

Status AddInPlace(float* acc, const float* x, int64_t n, cudaStream_t) {
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
  return Status::Ok();
}
Status AddInPlace(__nv_bfloat16* acc, const __nv_bfloat16* x, int64_t n, cudaStream_t) {
  std::vector<float> a = kernels::cuda::In(acc, n);
  const std::vector<float> b = kernels::cuda::In(x, n);
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  kernels::cuda::Out(a, acc);
  return Status::Ok();
}
// The CPU model's AddBias and AddBiasGrad loops (rows outer, one float addition each).
Status AddBias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += b[c];
  }
  return Status::Ok();
}
Status AddBias(__nv_bfloat16* y, const __nv_bfloat16* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  std::vector<float> yf = kernels::cuda::In(y, rows * cols);
  const std::vector<float> bf = kernels::cuda::In(b, cols);
  PIPECOORD_RETURN_IF_ERROR(AddBias(yf.data(), bf.data(), rows, cols, stream));
  kernels::cuda::Out(yf, y);
  return Status::Ok();
}
Status AddBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) db[c] += dy[r * cols + c];
  }
  return Status::Ok();
}
Status AddBiasGrad(const __nv_bfloat16* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  const std::vector<float> d = kernels::cuda::In(dy, rows * cols);
  return AddBiasGrad(d.data(), db, rows, cols, stream);
}
Status ScaleInPlace(float* x, float factor, int64_t n, cudaStream_t) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * factor;
  return Status::Ok();
}
Status CastToBf16(const float* in, __nv_bfloat16* out, int64_t n, cudaStream_t) {
  kernels::cuda::Out(std::vector<float>(in, in + n), out);
  return Status::Ok();
}
Status CastToFloat(const __nv_bfloat16* in, float* out, int64_t n, cudaStream_t) {
  const std::vector<float> v = kernels::cuda::In(in, n);
  std::copy(v.begin(), v.end(), out);
  return Status::Ok();
}
// In element order, one double addition each: the CPU model's GradientSquareSum, bit for bit.
Status AccumulateSumOfSquares(const float* x, int64_t n, double* acc, double*, cudaStream_t) {
  for (int64_t i = 0; i < n; ++i) *acc += static_cast<double>(x[i]) * x[i];
  return Status::Ok();
}
Status AccumulateScalar(double* acc, const double* value, cudaStream_t) {
  *acc += *value;
  return Status::Ok();
}
Status AccumulateScalar(double* acc, const float* value, cudaStream_t) {
  *acc += *value;
  return Status::Ok();
}

// ---- CudaDevice on host memory ----

namespace {

class HostMemory final : public kernels::RawMemorySource {
 public:
  Result<void*> Allocate(size_t bytes) override {
    void* p = std::aligned_alloc(512, (bytes + 511) / 512 * 512);
    if (p == nullptr) return ResourceExhausted("host double: out of memory");
    return p;
  }
  Status Free(void* ptr) override {
    std::free(ptr);
    return Status::Ok();
  }
};

// One stream that runs everything at once: every event has completed.
class NoEvents final : public kernels::StreamEvents {
 public:
  Result<Event> Record(kernels::StreamId) override { return Event{1}; }
  Result<bool> IsComplete(Event) override { return true; }
  Status Wait(Event) override { return Status::Ok(); }
  void Release(Event) override {}
};

}  // namespace

Result<std::unique_ptr<CudaDevice>> CudaDevice::Open(int index) {
  std::unique_ptr<CudaDevice> d(new CudaDevice());
  d->index_ = index;
  d->name_ = "host double";
  const kernels::CachingAllocator::Options options{kernels::MemoryKind::kCuda, index, 0};
  d->allocator_ = std::make_unique<kernels::CachingAllocator>(std::make_unique<HostMemory>(),
                                                              std::make_unique<NoEvents>(), options);
  auto gemm = kernels::cuda::GemmContext::Create({});
  if (!gemm.ok()) return gemm.status();
  d->gemm_ = std::move(gemm).value();
  return d;
}

CudaDevice::~CudaDevice() {
  gemm_.reset();
  allocator_.reset();
}

Status CudaDevice::MakeCurrent() const { return Status::Ok(); }
Status CudaDevice::Synchronize() const { return Status::Ok(); }

Result<kernels::Tensor> CudaDevice::Empty(const kernels::TensorSpec& spec) {
  auto t = kernels::Tensor::Empty(*allocator_, spec);
  // Uninitialised means anything: NaN bytes, so a read before a write shows.
  if (t.ok() && t->bytes() > 0) std::memset(t->data(), 0xFF, t->bytes());
  return t;
}

Result<kernels::Tensor> CudaDevice::Zeros(const kernels::TensorSpec& spec) {
  auto t = Empty(spec);
  if (t.ok()) PIPECOORD_RETURN_IF_ERROR(SetZero(*t));
  return t;
}

Status CudaDevice::SetZero(kernels::Tensor& t) {
  if (t.bytes() > 0) std::memset(t.data(), 0, t.bytes());
  return Status::Ok();
}

Result<kernels::Tensor> CudaDevice::Copy(const kernels::Tensor& src) {
  auto t = Empty(src.spec());
  if (t.ok() && src.bytes() > 0) std::memcpy(t->data(), src.data(), src.bytes());
  return t;
}

Status CudaDevice::Upload(const void* host, kernels::Tensor& t) {
  if (t.bytes() > 0) std::memcpy(t.data(), host, t.bytes());
  return Status::Ok();
}

Status CudaDevice::Download(const kernels::Tensor& t, void* host) {
  if (t.bytes() > 0) std::memcpy(host, t.data(), t.bytes());
  return Status::Ok();
}

Result<std::vector<float>> CudaDevice::DownloadFloats(const kernels::Tensor& t) {
  if (t.dtype() != kernels::DType::kF32) return InvalidArgument("DownloadFloats: not f32");
  std::vector<float> out(static_cast<size_t>(t.numel()));
  PIPECOORD_RETURN_IF_ERROR(Download(t, out.data()));
  return out;
}

uint64_t CudaDevice::allocated_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().allocated_bytes_current);
}
uint64_t CudaDevice::peak_allocated_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().allocated_bytes_peak);
}
uint64_t CudaDevice::peak_owned_bytes() const {
  return static_cast<uint64_t>(allocator_->stats().owned_bytes_peak);
}
void CudaDevice::ResetPeak() { allocator_->ResetPeakStats(); }

}  // namespace pipecoord::worker::cuda

// ---- CUDA runtime events and errors ----
//
// What the real runtime does that the backend relies on, kept: cudaEventElapsedTime refuses an
// event created with cudaEventDisableTiming or never recorded (cudaErrorInvalidResourceHandle)
// and answers (end - start) in milliseconds as a float. What cannot be stood in: the GPU's own
// clock and the lag between a launch and its execution (here every event completes when it is
// recorded, so device time equals host time); the gpu-tagged tests check those.

struct CUevent_st {
  unsigned int flags = 0;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

namespace pipecoord::worker::cuda::host_double {
namespace {

std::atomic<int64_t> events_created{0};
std::atomic<int64_t> events_live{0};
std::mutex fail_mu;
std::string fail_call;  // the next call of this name fails with fail_error
cudaError_t fail_error = cudaSuccess;

// cudaSuccess, or the failure FailNextCall set up for `call` (once).
cudaError_t Injected(const char* call) {
  std::lock_guard lock(fail_mu);
  if (fail_call != call) return cudaSuccess;
  fail_call.clear();
  return fail_error;
}

}  // namespace

// For the tests (declared where they use them): events created and not yet destroyed, and a
// failure of the next call of one CUDA runtime function.
int64_t EventsCreated() { return events_created.load(); }
int64_t EventsLive() { return events_live.load(); }
void FailNextCall(const std::string& call, cudaError_t error) {
  std::lock_guard lock(fail_mu);
  fail_call = call;
  fail_error = error;
}

}  // namespace pipecoord::worker::cuda::host_double

extern "C" {

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "error injected by the host double";
}

// The stream runs every call at once: a copy is done when it returns (device memory is host memory).
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind, cudaStream_t) {
  if (count > 0 && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
  if (cudaError_t e = pipecoord::worker::cuda::host_double::Injected("cudaMemcpyAsync"); e != cudaSuccess) return e;
  if (count > 0) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  namespace hd = pipecoord::worker::cuda::host_double;
  if (event == nullptr) return cudaErrorInvalidValue;
  if (cudaError_t e = hd::Injected("cudaEventCreateWithFlags"); e != cudaSuccess) return e;
  *event = new CUevent_st{flags, false, {}};
  ++hd::events_created;
  ++hd::events_live;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete event;
  --pipecoord::worker::cuda::host_double::events_live;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = pipecoord::worker::cuda::host_double::Injected("cudaEventRecord"); e != cudaSuccess) return e;
  event->recorded = true;
  event->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  return pipecoord::worker::cuda::host_double::Injected("cudaEventSynchronize");
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return cudaErrorInvalidValue;
  if (start == nullptr || end == nullptr) return cudaErrorInvalidResourceHandle;
  if ((start->flags & cudaEventDisableTiming) != 0 || (end->flags & cudaEventDisableTiming) != 0) {
    return cudaErrorInvalidResourceHandle;
  }
  if (!start->recorded || !end->recorded) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = pipecoord::worker::cuda::host_double::Injected("cudaEventElapsedTime"); e != cudaSuccess) return e;
  *ms = static_cast<float>(std::chrono::duration<double, std::milli>(end->at - start->at).count());
  return cudaSuccess;
}

}  // extern "C"
