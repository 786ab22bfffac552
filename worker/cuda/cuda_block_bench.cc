// One Llama block of the CUDA worker (CudaStageModel, the code the worker runs: a stage holding
// block 0 only, without the embedding or the LM head) timed per phase, as
// bench/torch_block_bench.py times PyTorch eager on the same GPU; tools/block_vs_torch.py divides
// the two (issue 15, section 5: goal >= 1.0x PyTorch eager).
//
//   F   CudaStageModel::Forward: RMSNorm, q/k/v projections, RoPE on q and k, causal flash
//       attention, output projection, residual; RMSNorm, SwiGLU MLP (w1, w3, w2), residual;
//       what the backward needs is kept (as torch's F keeps its autograd graph). The same ops as
//       torch's F, nothing more: no embedding, no head, no loss.
//   B   BackwardInput: the input gradient only (torch: autograd.grad(y, x, dy)).
//   W   BackwardWeight: every weight gradient, after B, timed alone and added into the fp32
//       gradient buffers (torch cannot run W alone and reports BW - B; see "W_from_BW_minus_B").
//   BW  BackwardFull: B then W in one call.
// Each phase is timed with CUDA events on the model's stream: the stream is synchronised first,
// so the host's launch time counts as it does in torch's timer. --warmup rounds, then --reps
// rounds of F, B, W, F, BW; block_s is the best (min) of the reps, block_s_median the median
// (torch_block_bench reports medians). After the rounds the last F output and B input gradient
// are read back and must be finite numbers.
//
// Prints one JSON object (block_s with torch_block_bench's keys F, B, W, BW in seconds, the
// device's name, the shape). Without a GPU it prints "no CUDA device: ..." and exits 0; a bad
// flag exits 2; any other failure (a CUDA call, the model) prints the error and exits 1.
//
//   bazel run -c opt //worker/cuda:cuda_block_bench      # h 4096, s 2048, 32 heads, ffn 11008
//   bazel run -c opt //worker/cuda:cuda_block_bench -- --hidden 1024 --heads 8 --ffn 2816 --seq 512
// The same source built against the host double of the GPU (host_kernels_for_tests.cc) is
// //worker/cuda:cuda_block_bench_host, which //worker/cuda:cuda_block_bench_test runs here.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/flags.h"
#include "common/json_writer.h"
#include "common/median.h"
#include "common/status.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/tensor.h"
#include "worker/cuda/cuda_device.h"
#include "worker/cuda/cuda_stage_model.h"
#include "worker/cuda/precision.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_shard.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CudaStatus;

struct Options {
  int batch = 1, seq = 2048, hidden = 4096, heads = 32, ffn = 11008;
  int warmup = 3, reps = 10, device = 0;
  std::string dtype = "bf16";  // torch_block_bench's names: bf16 or f32
};

// Seconds of each phase, one sample per rep.
struct Samples {
  std::vector<double> f, b, w, bw;
};

// Times one call on the device's stream with two CUDA events, from an idle stream.
class PhaseTimer {
 public:
  explicit PhaseTimer(CudaDevice* device) : device_(device) {}
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  ~PhaseTimer() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
  }

  Status Init() {
    PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaEventCreateWithFlags(&start_, cudaEventDefault),
                                         "cudaEventCreateWithFlags(start)"));
    return CudaStatus(cudaEventCreateWithFlags(&stop_, cudaEventDefault),
                      "cudaEventCreateWithFlags(stop)");
  }

  // Runs `call` (which queues work on the stream) and stores its device time in *seconds.
  template <typename Call>
  Status Time(const char* phase, Call&& call, double* seconds) {
    PIPECOORD_RETURN_IF_ERROR(device_->Synchronize());
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaEventRecord(start_, device_->stream()), "cudaEventRecord(start)"));
    Status st = call();
    if (!st.ok()) return Status(st.code(), std::string(phase) + ": " + st.message());
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaEventRecord(stop_, device_->stream()), "cudaEventRecord(stop)"));
    // A kernel's fault surfaces here, named with the phase that queued it.
    Status done = CudaStatus(cudaEventSynchronize(stop_), "cudaEventSynchronize(stop)");
    if (!done.ok()) return Status(done.code(), std::string(phase) + ": " + done.message());
    float ms = 0;
    PIPECOORD_RETURN_IF_ERROR(
        CudaStatus(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime"));
    *seconds = ms * 1e-3;
    return Status::Ok();
  }

 private:
  CudaDevice* device_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// A device tensor of `spec` holding values uniform in [-1, 1) (fixed seed).
Result<kernels::Tensor> RandomActivations(CudaDevice& device, const kernels::TensorSpec& spec,
                                          uint64_t seed) {
  std::vector<float> values(static_cast<size_t>(spec.numel()));
  kernels::cpu::Rng rng(seed);
  rng.FillUniform(values.data(), spec.numel(), -1, 1);
  auto t = device.Empty(spec);
  if (!t.ok()) return t;
  if (spec.dtype == kernels::DType::kBF16) {
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = kernels::cuda::FloatToBf16Bits(values[i]);
    PIPECOORD_RETURN_IF_ERROR(device.Upload(bits.data(), *t));
  } else {
    PIPECOORD_RETURN_IF_ERROR(device.Upload(values.data(), *t));
  }
  return t;
}

// OK when every element of an f32 or bf16 device tensor is finite; else names the first bad one.
Status CheckFinite(CudaDevice& device, const kernels::Tensor& t, const char* what) {
  std::vector<float> values(static_cast<size_t>(t.numel()));
  if (t.dtype() == kernels::DType::kBF16) {
    std::vector<uint16_t> bits(values.size());
    PIPECOORD_RETURN_IF_ERROR(device.Download(t, bits.data()));
    for (size_t i = 0; i < bits.size(); ++i) values[i] = kernels::cuda::Bf16BitsToFloat(bits[i]);
  } else if (t.dtype() == kernels::DType::kF32) {
    PIPECOORD_RETURN_IF_ERROR(device.Download(t, values.data()));
  } else {
    return Internal(std::string(what) + ": expected f32 or bf16, got " + kernels::ToString(t.spec()));
  }
  if (values.empty()) return Internal(std::string(what) + ": empty tensor");
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return Internal(std::string(what) + ": element " + std::to_string(i) + " of " +
                      std::to_string(values.size()) + " is " + std::to_string(values[i]) +
                      " (the block computed garbage; its timings would mean nothing)");
    }
  }
  return Status::Ok();
}

double Best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// torch_block_bench.py's block_flops: the forward GEMMs plus causal attention's two products.
struct Flops {
  double total, gemm, attention;
};
Flops ForwardFlops(const Options& o) {
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double gemm = 2 * tokens * (4.0 * o.hidden * o.hidden + 3.0 * o.hidden * o.ffn);
  const double attention = 2.0 * 2.0 * o.batch * o.seq * static_cast<double>(o.seq) * o.hidden / 2;
  return {gemm + attention, gemm, attention};
}

std::string Json(const Options& o, const std::string& device_name, const Samples& s,
                 uint64_t peak_bytes) {
  JsonWriter w;
  const std::string nl = "\n  ";
  w.BeginObject().Break(nl);
  w.Key("bench").String("cuda_block_bench").Break(nl);
  w.Key("device").String(device_name).Break(nl);
  w.Key("dtype").String(o.dtype).Break(nl);
  w.Key("shape").BeginObject().Key("batch").Int(o.batch).Key("seq").Int(o.seq);
  w.Key("hidden").Int(o.hidden).Key("heads").Int(o.heads).Key("ffn").Int(o.ffn).EndObject().Break(nl);
  w.Key("attention").String("flash attention (kernels/cuda/attention.h)").Break(nl);
  w.Key("layer").String(
      "CudaStageModel holding block 0 only (no embedding, no LM head): F = RMSNorm, q/k/v, RoPE, "
      "causal attention, wo, residual, RMSNorm, SwiGLU MLP, residual; the same ops as "
      "torch_block_bench's F").Break(nl);
  w.Key("timing").String(
      "CUDA events per phase from an idle stream; rounds of F, B, W, F, BW; block_s is the best "
      "(min) of reps after warmup, block_s_median the median (torch_block_bench's statistic); W "
      "is timed alone after B (torch reports BW - B: here W_from_BW_minus_B)").Break(nl);
  w.Key("warmup").Int(o.warmup).Key("reps").Int(o.reps).Break(nl);
  const double f = Best(s.f), b = Best(s.b), wt = Best(s.w), bw = Best(s.bw);
  w.Key("block_s").BeginObject().Key("F").Number(f).Key("B").Number(b).Key("W").Number(wt);
  w.Key("BW").Number(bw).Key("W_from_BW_minus_B").Number(std::max(bw - b, 0.0)).EndObject().Break(nl);
  w.Key("block_s_median").BeginObject().Key("F").Number(Median(s.f)).Key("B").Number(Median(s.b));
  w.Key("W").Number(Median(s.w)).Key("BW").Number(Median(s.bw)).EndObject().Break(nl);
  const Flops flops = ForwardFlops(o);
  w.Key("block_forward_tflops").Number(f > 0 ? flops.total / f / 1e12 : 0).Break(nl);
  w.Key("forward_flops").BeginObject().Key("total").Number(flops.total).Key("gemm").Number(flops.gemm);
  w.Key("attention").Number(flops.attention).EndObject().Break(nl);
  w.Key("pool_peak_allocated_bytes").Uint(peak_bytes).Break("\n");
  w.EndObject();
  return w.ok() ? w.Take() : "{\"error\": " + JsonString(w.error()) + "}";
}

// Builds the block, runs the rounds and prints the JSON.
Status Run(const Options& o, CudaDevice& device) {
  model::ModelConfig config;
  config.layers = 1;
  config.hidden = o.hidden;
  config.ffn_hidden = o.ffn;
  config.heads = o.heads;
  config.vocab = 32000;  // not used: the stage holds neither the embedding nor the head
  config.seq_len = o.seq;
  config.seed = 1;
  const model::StageShard block{0, 0, 1, false, false};
  model::BatchShape batch;
  batch.micro_batch_size = o.batch;
  batch.microbatches = 1;
  const Precision precision = o.dtype == "bf16" ? Precision::kBf16 : Precision::kFp32;
  auto made = CudaStageModel::Create(config, block, batch, precision, &device);
  if (!made.ok()) return made.status();
  CudaStageModel& model = **made;

  auto x = RandomActivations(device, model.ActivationSpec(), 1);
  if (!x.ok()) return x.status();
  auto dy = RandomActivations(device, model.ActivationSpec(), 2);
  if (!dy.ok()) return dy.status();
  PhaseTimer timer(&device);
  PIPECOORD_RETURN_IF_ERROR(timer.Init());
  PIPECOORD_RETURN_IF_ERROR(device.Synchronize());
  device.ResetPeak();

  Samples samples;
  kernels::Tensor y, dx;  // the last round's F output and B input gradient, checked at the end
  auto forward = [&]() -> Status {
    CudaStageInput in;
    in.activations = *x;  // shared handle: F reads x and never writes it
    auto out = model.Forward(0, std::move(in));
    if (!out.ok()) return out.status();
    y = std::move(out).value();
    return Status::Ok();
  };
  auto backward_input = [&]() -> Status {
    auto out = model.BackwardInput(0, *dy);
    if (!out.ok()) return out.status();
    dx = std::move(out).value();
    return Status::Ok();
  };
  auto backward_weight = [&]() -> Status { return model.BackwardWeight(0); };
  auto backward_full = [&]() -> Status { return model.BackwardFull(0, *dy).status(); };
  for (int round = 0; round < o.warmup + o.reps; ++round) {
    double f1 = 0, b = 0, w = 0, f2 = 0, bw = 0;
    PIPECOORD_RETURN_IF_ERROR(timer.Time("F", forward, &f1));
    PIPECOORD_RETURN_IF_ERROR(timer.Time("B", backward_input, &b));
    PIPECOORD_RETURN_IF_ERROR(timer.Time("W", backward_weight, &w));
    PIPECOORD_RETURN_IF_ERROR(timer.Time("F", forward, &f2));
    PIPECOORD_RETURN_IF_ERROR(timer.Time("BW", backward_full, &bw));
    if (round < o.warmup) continue;
    samples.f.push_back(f1);
    samples.f.push_back(f2);
    samples.b.push_back(b);
    samples.w.push_back(w);
    samples.bw.push_back(bw);
  }
  if (model.MicroBatchesInFlight() != 0) {
    return Internal("a micro-batch is still in flight after the rounds (the bench's own bug)");
  }
  PIPECOORD_RETURN_IF_ERROR(CheckFinite(device, y, "the block's output (F)"));
  PIPECOORD_RETURN_IF_ERROR(CheckFinite(device, dx, "the block's input gradient (B)"));
  const uint64_t peak = device.peak_allocated_bytes();
  y = kernels::Tensor();
  dx = kernels::Tensor();
  std::printf("%s\n", Json(o, device.name(), samples, peak).c_str());
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace
}  // namespace pipecoord::worker::cuda

int main(int argc, char** argv) {
  using namespace pipecoord;
  worker::cuda::Options o;
  FlagSet flags(
      "cuda_block_bench [--batch B --seq S --hidden H --heads N --ffn F --dtype bf16|f32 "
      "--warmup W --reps R --device D]",
      "F, B, W and BW of one Llama block of the CUDA worker (CudaStageModel), timed with CUDA "
      "events, as JSON with bench/torch_block_bench.py's block_s keys.");
  flags.Int("batch", &o.batch, "samples per micro-batch (default 1)");
  flags.Int("seq", &o.seq, "tokens per sample (default 2048)");
  flags.Int("hidden", &o.hidden, "model width (default 4096)");
  flags.Int("heads", &o.heads, "attention heads (default 32)");
  flags.Int("ffn", &o.ffn, "SwiGLU width (default 11008, Llama-7B's)");
  flags.Choice("dtype", &o.dtype, {"bf16", "f32"},
               "bf16 (mixed precision, fp32 masters) or f32 (default bf16)");
  flags.Int("warmup", &o.warmup, "untimed rounds first (default 3)");
  flags.Int("reps", &o.reps, "timed rounds; block_s is their best (default 10)");
  flags.Int("device", &o.device, "CUDA device index (default 0)");
  Status st = flags.Parse(argc - 1, argv + 1);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (st.ok() && o.warmup < 0) st = InvalidArgument("--warmup: must be >= 0, got " + std::to_string(o.warmup));
  if (st.ok() && o.reps < 1) st = InvalidArgument("--reps: must be >= 1, got " + std::to_string(o.reps));
  if (st.ok() && o.ffn < 1) st = InvalidArgument("--ffn: must be >= 1, got " + std::to_string(o.ffn));
  if (!st.ok()) {
    std::fprintf(stderr, "cuda_block_bench: %s\n", st.ToString().c_str());
    return 2;
  }
  auto device = worker::cuda::CudaDevice::Open(o.device);
  if (!device.ok()) {
    if (device.status().code() == Code::kUnavailable) {
      std::printf("%s\n", device.status().message().c_str());  // "no CUDA device: ..."
      return 0;
    }
    std::fprintf(stderr, "cuda_block_bench: %s\n", device.status().ToString().c_str());
    return 1;
  }
  st = worker::cuda::Run(o, **device);
  if (!st.ok()) {
    std::fprintf(stderr, "cuda_block_bench: %s\n", st.ToString().c_str());
    // A bad shape (the model's own checks) is the caller's error; anything else is a failure.
    return st.code() == Code::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
