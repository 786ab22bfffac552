#include "worker/cuda/cuda_backend.h"

#ifndef PIPECOORD_CUDA_HOST_EMULATION
#include "worker/transport/nccl_transport.h"
#include "worker/transport/staged_transport.h"
#endif

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "jobplan/probe_placement.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/checksum.h"
#include "kernels/cuda/cuda_check.h"
#include "worker/cuda/elementwise.h"
#include "worker/daemon/assignment_model.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_shard.h"
#include "worker/transport/transport_choice.h"

namespace pipecoord::worker::cuda {

CudaBackend::CudaBackend(const v1::Assignment& a, std::shared_ptr<const TrainingData> data, Precision precision,
                         std::shared_ptr<CudaDevice> device)
    : device_(std::move(device)), data_(std::move(data)), precision_(precision),
      mbs_(a.spec().microbatches()), dp_rank_(a.dp_rank()), tp_rank_(a.tp_rank()),
      mbs_size_(a.spec().micro_batch_size()), seq_(a.spec().model().seq_len()),
      hidden_(a.spec().model().hidden()), spec_(a.spec()) {}

CudaBackend::~CudaBackend() {
  if (marks_.empty() && reference_ == nullptr && recompute_events_.empty()) return;
  // Nothing can be reported from here; a pending event is released once it completes.
  (void)device_->MakeCurrent();
  for (TimingMark& m : marks_) {
    if (m.begin != nullptr) (void)cudaEventDestroy(m.begin);
    if (m.end != nullptr) (void)cudaEventDestroy(m.end);
  }
  if (reference_ != nullptr) (void)cudaEventDestroy(reference_);
  for (RecomputeEvents& r : recompute_events_) {
    if (r.begin != nullptr) (void)cudaEventDestroy(r.begin);
    if (r.end != nullptr) (void)cudaEventDestroy(r.end);
  }
}

Status CudaBackend::RecordRecompute(bool begin) {
  if (open_mark_ < 0) return Status::Ok();  // not timed (outside the executor's marks)
  if (begin) {
    if (recompute_used_ == recompute_events_.size()) {
      auto pair = NewTimingEventPair();
      if (!pair.ok()) return pair.status();
      recompute_events_.push_back({pair->first, pair->second, -1});
    }
    RecomputeEvents& r = recompute_events_[recompute_used_++];
    r.mark = open_mark_;
    return kernels::cuda::CudaStatus(cudaEventRecord(r.begin, device_->stream()), "cudaEventRecord(recompute begin)");
  }
  if (recompute_used_ == 0) return FailedPrecondition("device timing: a recompute ended before it began");
  return kernels::cuda::CudaStatus(cudaEventRecord(recompute_events_[recompute_used_ - 1].end, device_->stream()),
                                   "cudaEventRecord(recompute end)");
}

Result<cudaEvent_t> CudaBackend::NewTimingEvent() {
  cudaEvent_t event = nullptr;
  // cudaEventDefault: timing on (the transports' ordering events turn it off; these need it).
  PIPECOORD_RETURN_IF_ERROR(kernels::cuda::CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDefault),
                                                      "cudaEventCreateWithFlags(timing event)"));
  return event;
}

Result<std::pair<cudaEvent_t, cudaEvent_t>> CudaBackend::NewTimingEventPair() {
  // Returned (and kept by the caller) once both exist, so the destructor finds every event made.
  auto b = NewTimingEvent();
  if (!b.ok()) return b.status();
  auto e = NewTimingEvent();
  if (!e.ok()) {
    (void)cudaEventDestroy(*b);
    return e.status();
  }
  return std::make_pair(*b, *e);
}

Status CudaBackend::RecordMark(int mark, bool begin) {
  if (mark < 0) return InvalidArgument("device timing: mark " + std::to_string(mark) + " is negative");
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  while (marks_.size() <= static_cast<size_t>(mark)) {
    auto pair = NewTimingEventPair();
    if (!pair.ok()) return pair.status();
    marks_.push_back({pair->first, pair->second, false, false});
  }
  TimingMark& m = marks_[static_cast<size_t>(mark)];
  if (begin) {
    m.begun = true;
    m.ended = false;  // a mark left by a failed step starts over
    open_mark_ = mark;
    if (mark == 0) recompute_used_ = 0;  // a step's first mark: a failed step's pairs are dropped
  } else if (!m.begun) {
    return FailedPrecondition("device timing: mark " + std::to_string(mark) + " ended before it began");
  } else {
    m.ended = true;
    open_mark_ = -1;
  }
  return kernels::cuda::CudaStatus(cudaEventRecord(begin ? m.begin : m.end, device_->stream()),
                                   std::string("cudaEventRecord(timing mark ") + std::to_string(mark) +
                                       (begin ? " begin)" : " end)"));
}

Status CudaBackend::MarkBegin(int mark) { return RecordMark(mark, true); }
Status CudaBackend::MarkEnd(int mark) { return RecordMark(mark, false); }

Result<std::vector<DeviceSpan>> CudaBackend::ResolveMarks(int count, const std::function<int64_t()>& clock_ns) {
  if (count < 0 || static_cast<size_t>(count) > marks_.size()) {
    return FailedPrecondition("device timing: " + std::to_string(count) + " marks to resolve, " +
                              std::to_string(marks_.size()) + " were ever recorded");
  }
  for (int i = 0; i < count; ++i) {
    const TimingMark& m = marks_[static_cast<size_t>(i)];
    if (!m.begun || !m.ended) {
      return FailedPrecondition("device timing: mark " + std::to_string(i) + " was not " +
                                (m.begun ? "ended" : "begun") + " since the last resolve");
    }
  }
  for (TimingMark& m : marks_) m.begun = m.ended = false;
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  // Every mark completes here; a kernel's fault surfaces here too.
  PIPECOORD_RETURN_IF_ERROR(device_->Synchronize());
  if (reference_ == nullptr) {
    auto r = NewTimingEvent();
    if (!r.ok()) return r.status();
    reference_ = *r;
  }
  // The reference on an idle stream: the device stamps it after `before` and before the wait
  // for it returns; its midpoint is the reference's time on the executor's clock.
  const int64_t before = clock_ns();
  PIPECOORD_RETURN_IF_ERROR(kernels::cuda::CudaStatus(cudaEventRecord(reference_, device_->stream()),
                                                      "cudaEventRecord(timing reference)"));
  PIPECOORD_RETURN_IF_ERROR(kernels::cuda::CudaStatus(cudaEventSynchronize(reference_),
                                                      "cudaEventSynchronize(timing reference)"));
  const int64_t after = clock_ns();
  const int64_t reference_ns = before + (after - before) / 2;
  // A mark's begin as its offset before the reference (recorded after every mark, so >= 0),
  // its end as its duration after its begin (a float of milliseconds is finest for short spans).
  auto elapsed_ns = [](cudaEvent_t from, cudaEvent_t to, const std::string& what) -> Result<int64_t> {
    float ms = 0;
    PIPECOORD_RETURN_IF_ERROR(kernels::cuda::CudaStatus(cudaEventElapsedTime(&ms, from, to),
                                                        "cudaEventElapsedTime(" + what + ")"));
    return std::llround(static_cast<double>(ms) * 1e6);
  };
  std::vector<DeviceSpan> spans;
  spans.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    const TimingMark& m = marks_[static_cast<size_t>(i)];
    const std::string name = "timing mark " + std::to_string(i);
    auto before_reference = elapsed_ns(m.begin, reference_, name + " begin, reference");
    if (!before_reference.ok()) return before_reference.status();
    auto duration = elapsed_ns(m.begin, m.end, name + " begin, end");
    if (!duration.ok()) return duration.status();
    const int64_t start = reference_ns - *before_reference;
    spans.push_back({start, start + std::max<int64_t>(0, *duration), 0});
  }
  for (size_t k = 0; k < recompute_used_; ++k) {
    const RecomputeEvents& r = recompute_events_[k];
    if (r.mark < 0 || r.mark >= count) continue;  // a failed step's, never resolved
    auto ns = elapsed_ns(r.begin, r.end, "recompute " + std::to_string(k));
    if (!ns.ok()) return ns.status();
    spans[static_cast<size_t>(r.mark)].recompute_ns += std::max<int64_t>(0, *ns);
  }
  recompute_used_ = 0;
  return spans;
}

Result<nccl_wire::DeviceIdentity> CudaBackend::DeviceIdentity() const {
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  // The host double's devices: one "GPU" per index, on one host.
  const int index = device_->index();
  nccl_wire::DeviceIdentity id;
  id.host = "host double";
  id.pci_bus_id = "0000:" + std::to_string(index) + ":00.0";
  id.uuid = std::string(16, static_cast<char>('A' + index % 26));
  id.device = index;
  return id;
#else
  return LocalDeviceIdentity(device_->index());
#endif
}

Result<std::unique_ptr<Transport>> CudaBackend::BoundaryTransport(Transport& host,
                                                                  const BoundaryTransportContext& context,
                                                                  std::string* how) {
  // Every rank publishes its card and reads everyone's, so all take the same path: a rank on
  // NCCL would wait in Connect for a peer that staged.
  RankCard card;
  card.rank = context.rank;
  card.peers = context.peers;
  auto identity = DeviceIdentity();
  if (identity.ok()) {
    card.device = *identity;
  } else {
    card.problem = identity.status().ToString();
  }
  TransportChoice choice;
  if (!context.rendezvous) {
    choice.why = "no rendezvous to agree on a transport with the other ranks: boundary tensors staged through the host";
  } else {
    auto cards = ExchangeRankCards(card, context.world, context.session, context.rendezvous, context.timeout);
    if (!cards.ok()) {
      return Status(cards.status().code(), "exchanging transport cards with the other ranks: " + cards.status().message());
    }
    choice = ChooseTransport(*cards);
  }
  *how = choice.why + " (" + kernels::ToString(BoundarySpec()) + ")";
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  // The host double keeps "device" tensors in host memory: its callers pass them themselves.
  (void)host;
  *how += "; host emulation: no transport built";
  return std::unique_ptr<Transport>();
#else
  if (!choice.nccl) {
    // Processes sharing one GPU (NCCL refuses them): pinned host memory over the TCP links.
    StagedTransportOptions options;
    options.device_allocator = &device_->allocator();
    options.compute_stream = device_->stream();
    return std::unique_ptr<Transport>(std::make_unique<StagedTransport>(host, options));
  }
  // Received tensors come from the pool, stream-ordered on the compute stream (the default
  // recv_waits_for_compute).
  auto nccl = NcclTransport::Create(device_->index(), device_->stream(), device_->allocator());
  if (!nccl.ok()) return Status(nccl.status().code(), "NcclTransport::Create: " + nccl.status().message());
  Status st = (*nccl)->Connect(context.rank, context.peers, context.session, context.rendezvous, context.timeout);
  if (!st.ok()) {
    (*nccl)->Shutdown();
    return Status(st.code(), "NcclTransport::Connect: " + st.message());
  }
  return std::unique_ptr<Transport>(std::move(nccl).value());
#endif
}

kernels::TensorSpec CudaBackend::BoundarySpec() const {
  // With sequence parallelism this rank's token rows (CudaStageModel::ActivationSpec).
  const int tp = std::max(1, spec_.tp());
  return {ActivationDType(precision_), {mbs_size_, spec_.sequence_parallel() && tp > 1 ? seq_ / tp : seq_, hidden_}};
}

Status CudaBackend::FinalizeGradients() {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  views_current_ = false;
  bool released = false;
  for (auto& [k, m] : stages_) {
    PIPECOORD_RETURN_IF_ERROR(m->FinalizeGradients());
    PIPECOORD_RETURN_IF_ERROR(m->ReleaseGradients());  // ZeRO-2: the shard's only, until the next first W
    released = released || m->gradients_released();
  }
  if (released) {  // the views of the whole gradients would keep them alive
    gradients_.reset();
    stage_gradients_.clear();
  }
  return Status::Ok();
}

CudaStageModel* CudaBackend::stage(int stage) {
  auto it = stages_.find(stage);
  return it == stages_.end() ? nullptr : it->second.get();
}

Result<CudaStageModel*> CudaBackend::Find(int s) {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  views_current_ = false;  // the device state may change from here on
  CudaStageModel* m = stage(s);
  if (m == nullptr) return FailedPrecondition("stage " + std::to_string(s) + " is not held by this rank");
  return m;
}

Status CudaBackend::Deferred() {
  Status st = std::move(deferred_);
  deferred_ = Status::Ok();
  return st;
}

namespace {

// The tokens (embedding stage) and targets (head stage) of one batch the stage reads.
Result<CudaStageInput> StageTokens(const model::StageShard& shard,
                                   const std::function<Result<model::TokenBatch>()>& batch) {
  CudaStageInput in;
  if (!shard.has_embedding && !shard.has_head) return in;
  auto b = batch();
  if (!b.ok()) return b.status();
  if (shard.has_embedding) in.tokens = std::move(b->inputs);
  if (shard.has_head) in.targets = std::move(b->targets);
  return in;
}

}  // namespace

Result<kernels::Tensor> CudaBackend::Forward(int s, int mb, int step, kernels::Tensor input) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  const model::StageShard& shard = (*m)->shard();
  auto in = StageTokens(shard, [&] { return data_->Train(step, mb); });  // this replica's own sequences
  if (!in.ok()) return in.status();
  if (!shard.has_embedding) in->activations = std::move(input);
  const auto slot = replay_slot_.find({s, mb});
  kernels::Tensor loss;
  auto out = (*m)->Forward(mb, std::move(in).value(), slot != replay_slot_.end() ? &loss : nullptr);
  if (!out.ok()) return out;
  if (shard.has_head) has_loss_ = true;
  if (step != forwards_step_) forwarded_.clear();
  forwards_step_ = step;
  forwarded_.insert({s, mb});
  if (slot != replay_slot_.end()) PIPECOORD_RETURN_IF_ERROR(HashInto(*out, loss, slot->second));
  return out;
}

Result<kernels::Tensor> CudaBackend::Evaluate(int s, int batch, kernels::Tensor input) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  const model::StageShard& shard = (*m)->shard();
  auto in = StageTokens(shard, [&] { return data_->Validation(batch); });
  if (!in.ok()) return in.status();
  if (!shard.has_embedding) in->activations = std::move(input);
  kernels::Tensor loss;
  auto out = (*m)->ForwardOnly(std::move(in).value(), shard.has_head ? &loss : nullptr);
  if (!out.ok()) return out.status();
  if (shard.has_head) {
    double value = 0;
    PIPECOORD_RETURN_IF_ERROR(device_->Download(loss, &value));  // waits: validation is between steps
    val_loss_sum_ += value;
    ++val_batches_;
  }
  return out;
}

bool CudaBackend::TakeValidationLoss(double* loss) {
  if (val_batches_ == 0) return false;
  *loss = val_loss_sum_ / val_batches_;
  val_loss_sum_ = 0;
  val_batches_ = 0;
  return true;
}

Status CudaBackend::HashInto(const kernels::Tensor& out, const kernels::Tensor& loss, int slot) {
  const kernels::Tensor& what = loss.empty() ? out : loss;
  if (what.bytes() % sizeof(float) != 0) {
    return Internal("replay probe: " + kernels::ToString(what.spec()) + " is not whole floats");
  }
  auto* hash = reinterpret_cast<uint64_t*>(static_cast<char*>(hashes_.data()) + sizeof(uint64_t) * static_cast<size_t>(slot));
  return kernels::cuda::HashFloats(static_cast<const float*>(what.data()),
                                   static_cast<int64_t>(what.bytes() / sizeof(float)), hash, device_->stream());
}

Result<uint64_t> CudaBackend::ReadHash(int slot) {
  std::vector<uint64_t> all(hashes_.bytes() / sizeof(uint64_t));
  PIPECOORD_RETURN_IF_ERROR(device_->Download(hashes_, all.data()));  // waits for the stream
  return all.at(static_cast<size_t>(slot));
}

Result<ComputeBackend::Replay> CudaBackend::ReplayForward(int s, int mb, int step) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  const auto slot = replay_slot_.find({s, mb});
  if (slot == replay_slot_.end() || forwards_step_ != step || !forwarded_.count({s, mb})) {
    return FailedPrecondition("PROBE replays F of stage " + std::to_string(s) + " micro-batch " + std::to_string(mb) +
                              ", which has not run in step " + std::to_string(step) +
                              (slot == replay_slot_.end() ? " (no PROBE of the job list names it)" : ""));
  }
  auto in = StageTokens((*m)->shard(), [&] { return data_->Train(step, mb); });  // the same tokens again
  if (!in.ok()) return in.status();
  kernels::Tensor loss;
  auto out = (*m)->ReplayForward(mb, std::move(in).value(), &loss);
  if (!out.ok()) return out.status();
  const int last = static_cast<int>(replay_slot_.size());
  PIPECOORD_RETURN_IF_ERROR(HashInto(*out, loss, last));
  out = kernels::Tensor();
  loss = kernels::Tensor();
  auto original = ReadHash(slot->second);
  if (!original.ok()) return original.status();
  auto again = ReadHash(last);
  if (!again.ok()) return again.status();
  return Replay{s, mb, *original, *again};
}

Result<uint64_t> CudaBackend::SeededForward(int s, int step) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  if (hashes_.empty()) return FailedPrecondition("seeded replay of stage " + std::to_string(s) + ": no PROBE of the job list runs one");
  // StageModel::SeededForward's inputs, from the probe seed of the step and the stage.
  const uint64_t seed = kernels::cpu::CombineSeeds(kernels::cpu::ProbeSeed(spec_.model().seed(), step), static_cast<uint64_t>(s));
  const model::StageShard& shard = (*m)->shard();
  const int vocab = spec_.model().vocab();
  const int64_t n = mbs_size_ * seq_;
  kernels::cpu::Rng rng(seed);
  CudaStageInput in;
  if (shard.has_embedding) {
    in.tokens.resize(static_cast<size_t>(n));
    for (int32_t& t : in.tokens) t = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab)));
  } else {
    // With sequence parallelism this rank's token rows, each rank of the group its own draw (the
    // CPU model's).
    const kernels::TensorSpec spec = BoundarySpec();
    std::vector<float> x(static_cast<size_t>(spec.numel()));
    const bool sp = spec_.sequence_parallel() && spec_.tp() > 1;
    kernels::cpu::Rng own(sp ? kernels::cpu::CombineSeeds(seed, static_cast<uint64_t>(tp_rank_)) : seed);
    own.FillUniform(x.data(), static_cast<int64_t>(x.size()), -1, 1);
    auto t = device_->Empty(spec);
    if (!t.ok()) return t.status();
    if (precision_ == Precision::kBf16) {
      std::vector<uint16_t> bits(x.size());
      for (size_t i = 0; i < x.size(); ++i) bits[i] = kernels::cuda::FloatToBf16Bits(x[i]);
      PIPECOORD_RETURN_IF_ERROR(device_->Upload(bits.data(), *t));
    } else {
      PIPECOORD_RETURN_IF_ERROR(device_->Upload(x.data(), *t));
    }
    in.activations = std::move(t).value();
  }
  if (shard.has_head) {
    kernels::cpu::Rng targets(kernels::cpu::CombineSeeds(seed, 0x74617267ULL));  // "targ"
    in.targets.resize(static_cast<size_t>(n));
    for (int32_t& t : in.targets) t = static_cast<int32_t>(targets.Below(static_cast<uint32_t>(vocab)));
  }
  kernels::Tensor loss;
  auto out = (*m)->ForwardOnly(std::move(in), &loss);
  if (!out.ok()) return out.status();
  const int last = static_cast<int>(replay_slot_.size());
  PIPECOORD_RETURN_IF_ERROR(HashInto(*out, loss, last));
  out = kernels::Tensor();
  loss = kernels::Tensor();
  return ReadHash(last);
}

Result<kernels::Tensor> CudaBackend::BackwardInput(int s, int mb, kernels::Tensor grad) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  return (*m)->BackwardInput(mb, std::move(grad));
}

Status CudaBackend::BackwardWeight(int s, int mb) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  return (*m)->BackwardWeight(mb);
}

Result<kernels::Tensor> CudaBackend::BackwardFull(int s, int mb, kernels::Tensor grad) {
  auto m = Find(s);
  if (!m.ok()) return m.status();
  return (*m)->BackwardFull(mb, std::move(grad));
}

std::vector<std::span<float>> CudaBackend::Gradients() { return {}; }

parallel::FloatBuffer* CudaBackend::DeviceGradients() {
  views_current_ = false;  // the all-reduce writes the device state
  if (gradients_ == nullptr) {
    std::vector<kernels::Tensor> grads;
    for (auto& [k, m] : stages_) {
      for (DeviceParameter& p : m->parameters()) grads.push_back(p.grad);  // handles: the same storage
    }
    auto buffer = DeviceTensorFloats::Create(device_.get(), std::move(grads));
    if (!buffer.ok()) {
      // The stage model makes every gradient f32 on this device: reported by the next call.
      if (deferred_.ok()) deferred_ = Internal("DeviceGradients: " + buffer.status().message());
      return nullptr;
    }
    gradients_ = std::move(buffer).value();
  }
  return gradients_.get();
}

namespace {

// The tensors `of` gives for the stage as one device buffer, built once and cached, or null with
// the error kept in `deferred` (the stage not held, none given, or one not f32 on the device: a
// broken invariant).
DeviceTensorFloats* StageBuffer(CudaDevice* device, std::map<int, std::unique_ptr<CudaStageModel>>& stages,
                                std::map<int, std::unique_ptr<DeviceTensorFloats>>& cache, int stage,
                                const std::function<std::vector<kernels::Tensor>(CudaStageModel&)>& of,
                                const char* what, Status* deferred) {
  auto cached = cache.find(stage);
  if (cached != cache.end()) return cached->second.get();
  auto it = stages.find(stage);
  std::vector<kernels::Tensor> tensors;
  if (it != stages.end()) tensors = of(*it->second);
  if (tensors.empty()) {
    if (deferred->ok()) {
      *deferred = FailedPrecondition(std::string(what) + ": stage " + std::to_string(stage) +
                                     (it == stages.end() ? " is not held by this rank" : " holds none"));
    }
    return nullptr;
  }
  auto buffer = DeviceTensorFloats::Create(device, std::move(tensors));
  if (!buffer.ok()) {
    if (deferred->ok()) *deferred = Internal(std::string(what) + ": " + buffer.status().message());
    return nullptr;
  }
  return (cache[stage] = std::move(buffer).value()).get();
}

// Each parameter's `field` (handles: the same storage), in the stage's order.
std::function<std::vector<kernels::Tensor>(CudaStageModel&)> EachParameters(kernels::Tensor DeviceParameter::*field) {
  return [field](CudaStageModel& m) {
    std::vector<kernels::Tensor> tensors;
    for (DeviceParameter& p : m.parameters()) tensors.push_back(p.*field);
    return tensors;
  };
}

}  // namespace

parallel::FloatBuffer* CudaBackend::DeviceStageGradients(int s) {
  views_current_ = false;
  return StageBuffer(device_.get(), stages_, stage_gradients_, s, EachParameters(&DeviceParameter::grad),
                     "DeviceStageGradients", &deferred_);
}

parallel::FloatBuffer* CudaBackend::DeviceStageValues(int s) {
  views_current_ = false;
  // Sharded masters (bf16): the all-gather brings the other replicas' bf16 copies.
  const auto it = stages_.find(s);
  const bool sharded = it != stages_.end() && it->second->masters_sharded();
  return StageBuffer(device_.get(), stages_, stage_values_, s,
                     EachParameters(sharded ? &DeviceParameter::compute : &DeviceParameter::master), "DeviceStageValues",
                     &deferred_);
}

parallel::FloatBuffer* CudaBackend::DeviceTiedEmbeddingGradient(int s) {
  views_current_ = false;  // the sum writes the device state
  return StageBuffer(
      device_.get(), stages_, tied_gradients_, s,
      [](CudaStageModel& m) {
        kernels::Tensor grad = m.TiedEmbeddingGradient();
        return grad.empty() ? std::vector<kernels::Tensor>() : std::vector<kernels::Tensor>{grad};
      },
      "DeviceTiedEmbeddingGradient", &deferred_);
}

Status CudaBackend::ParametersGathered() {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  for (auto& [k, m] : stages_) {
    // Sharded masters: the optimizer step rounded the shard's copies, the all-gather the rest.
    if (!m->masters_sharded()) PIPECOORD_RETURN_IF_ERROR(m->RefreshComputeWeights());
  }
  values_need_gather_ = false;
  return Status::Ok();
}

Result<double> CudaBackend::GradientSquareSum(bool count_replicated) {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  // One accumulator per stage, then the elementwise kernels' scratch.
  const auto n = static_cast<int64_t>(stages_.size());
  const int64_t doubles = n + kSumOfSquaresScratch;  // bytes: kernels::DType has no f64
  auto scratch = device_->Zeros({kernels::DType::kU8, {doubles * static_cast<int64_t>(sizeof(double))}});
  if (!scratch.ok()) return scratch.status();
  auto* acc = static_cast<double*>(scratch->data());
  int i = 0;
  for (auto& [k, m] : stages_) {
    PIPECOORD_RETURN_IF_ERROR(m->AccumulateGradientSquares(acc + i++, acc + n, count_replicated));
  }
  std::vector<double> sums(static_cast<size_t>(doubles));
  PIPECOORD_RETURN_IF_ERROR(device_->Download(*scratch, sums.data()));
  double sum = 0;  // the CPU backend's order: stage by stage
  for (int64_t j = 0; j < n; ++j) sum += sums[static_cast<size_t>(j)];
  return sum;
}

Status CudaBackend::ScaleGradients(float factor) {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  views_current_ = false;
  for (auto& [k, m] : stages_) PIPECOORD_RETURN_IF_ERROR(m->ScaleGradients(factor));
  return Status::Ok();
}

Status CudaBackend::OptimizerStep(int) {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  views_current_ = false;
  const kernels::cpu::AdamWOptions options = AdamWOptionsAt(spec_, optimizer_steps());
  for (auto& [k, m] : stages_) {
    PIPECOORD_RETURN_IF_ERROR(m->OptimizerStep(options));
    PIPECOORD_RETURN_IF_ERROR(m->ZeroGrad());
  }
  return Status::Ok();
}

bool CudaBackend::StepLoss(double* loss) {
  if (!has_loss_) return false;
  has_loss_ = false;
  double sum = 0;
  for (auto& [k, m] : stages_) {
    auto s = m->TakeLossSum();
    if (!s.ok()) {
      // Reported by the next call; the step shows a NaN loss rather than none.
      if (deferred_.ok()) deferred_ = s.status();
      *loss = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
    sum += *s;
  }
  *loss = sum / mbs_;
  return true;
}

uint64_t CudaBackend::memory_in_use_bytes() const { return device_->allocated_bytes(); }
uint64_t CudaBackend::memory_peak_bytes() const { return device_->peak_owned_bytes(); }
uint64_t CudaBackend::memory_reserved_bytes() const {
  return static_cast<uint64_t>(device_->allocator().stats().reserved_bytes_current);
}
void CudaBackend::ResetPeak() { device_->ResetPeak(); }

Status CudaBackend::HoldBytes(uint64_t bytes) {
  auto t = device_->Zeros({kernels::DType::kU8, {static_cast<int64_t>(bytes)}});
  if (!t.ok()) return t.status();
  held_.push_back(std::move(t).value());
  return Status::Ok();
}

Status CudaBackend::ProbeGemm(const kernels::cpu::ProbeShape& s, const std::vector<float>& x,
                              const std::vector<float>& w, std::vector<float>* y) {
  PIPECOORD_RETURN_IF_ERROR(Deferred());
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  if (x.size() != static_cast<size_t>(s.m * s.k) || w.size() != static_cast<size_t>(s.n * s.k)) {
    return InvalidArgument("ProbeGemm: " + s.ToString() + " needs " + std::to_string(s.m * s.k) + " and " +
                           std::to_string(s.n * s.k) + " inputs, got " + std::to_string(x.size()) + " and " +
                           std::to_string(w.size()));
  }
  y->assign(static_cast<size_t>(s.m * s.n), 0.0f);
  // The two inputs from the pool, uploaded, then the output (zeroed: W accumulates into it).
  auto upload = [&](const void* host, const kernels::TensorSpec& spec) -> Result<kernels::Tensor> {
    auto t = device_->Empty(spec);
    if (!t.ok()) return t.status();
    PIPECOORD_RETURN_IF_ERROR(device_->Upload(host, *t));
    return t;
  };
  const bool fp32 = precision_ == Precision::kFp32;
  // bf16: y [m, n] = sum over k of x[m, k] w[n, k], as W's dw [out = m, in = n] over tokens = k:
  // dy = x^T [k, m], x = w^T [k, n].
  std::vector<uint16_t> xt, wt;
  if (!fp32) {
    xt.resize(static_cast<size_t>(s.k * s.m));
    wt.resize(static_cast<size_t>(s.k * s.n));
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.k; ++j) xt[j * s.m + i] = kernels::cuda::FloatToBf16Bits(x[i * s.k + j]);
    }
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t j = 0; j < s.k; ++j) wt[j * s.n + i] = kernels::cuda::FloatToBf16Bits(w[i * s.k + j]);
    }
  }
  auto a = fp32 ? upload(x.data(), {kernels::DType::kF32, {s.m, s.k}}) : upload(xt.data(), {kernels::DType::kBF16, {s.k, s.m}});
  if (!a.ok()) return a.status();
  auto b = fp32 ? upload(w.data(), {kernels::DType::kF32, {s.n, s.k}}) : upload(wt.data(), {kernels::DType::kBF16, {s.k, s.n}});
  if (!b.ok()) return b.status();
  auto out = device_->Zeros({kernels::DType::kF32, {s.m, s.n}});
  if (!out.ok()) return out.status();
  auto* yd = static_cast<float*>(out->data());
  PIPECOORD_RETURN_IF_ERROR(
      fp32 ? device_->gemm().Forward(static_cast<const float*>(a->data()), static_cast<const float*>(b->data()), yd,
                                     {s.m, s.k, s.n})
           : device_->gemm().BackwardWeight(static_cast<const __nv_bfloat16*>(a->data()),
                                            static_cast<const __nv_bfloat16*>(b->data()), yd, {s.k, s.n, s.m}));
  return device_->Download(*out, y->data());
}

std::vector<StateTensor> CudaBackend::CheckpointState() {
  // The same names as the CPU backend's; "value" is the fp32 master in both precisions.
  std::vector<std::string> names;
  std::vector<kernels::Tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;  // whole tensors' (a sharded master's view is flat)
  for (auto& [k, m] : stages_) {
    const std::string stage = "stage" + std::to_string(k) + "/";
    for (DeviceParameter& p : m->parameters()) {
      const std::string name = stage + p.name;
      // A ZeRO shard holds elements [begin, begin + n) of the tensor's moments (and in bf16 of
      // its masters), flattened (the CPU backend's names: checkpoint.h reshards them across dp).
      const std::string range = p.sharded() ? "@" + std::to_string(p.moment_begin) : "";
      if (!m->masters_sharded() || !p.adam_m.empty()) {
        names.push_back(name + "/value" + (m->masters_sharded() ? range : ""));
        tensors.push_back(p.master);
        shapes.push_back(p.shape);
      }
      if (p.adam_m.empty()) continue;  // outside this replica's ZeRO shard
      names.push_back(name + "/adam_m" + range);
      tensors.push_back(p.adam_m);
      shapes.push_back(p.shape);
      names.push_back(name + "/adam_v" + range);
      tensors.push_back(p.adam_v);
      shapes.push_back(p.shape);
    }
  }
  views_.resize(tensors.size());
  Status st = device_->MakeCurrent();
  for (size_t i = 0; i < tensors.size() && st.ok(); ++i) {
    views_[i].first = tensors[i];
    views_[i].second.resize(static_cast<size_t>(tensors[i].numel()));
    st = device_->Download(tensors[i], views_[i].second.data());
  }
  if (!st.ok() && deferred_.ok()) deferred_ = st;
  views_current_ = st.ok();
  std::vector<StateTensor> out;
  out.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    // Whole tensors in their shape (as the CPU backend writes them); shards flat.
    const bool whole = names[i].find('@') == std::string::npos;
    out.push_back({names[i], views_[i].second, whole ? shapes[i] : std::vector<int64_t>{}});
  }
  return out;
}

Status CudaBackend::UploadCheckpointViews() {
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  for (auto& [tensor, host] : views_) PIPECOORD_RETURN_IF_ERROR(device_->Upload(host.data(), tensor));
  for (auto& [k, m] : stages_) {
    PIPECOORD_RETURN_IF_ERROR(m->RefreshComputeWeights());
    values_need_gather_ = values_need_gather_ || m->masters_sharded();  // the other shards' copies
  }
  // The host buffers must outlive nothing: pageable uploads are staged before they return.
  return Status::Ok();
}

int64_t CudaBackend::optimizer_steps() const {
  return stages_.empty() ? 0 : stages_.begin()->second->optimizer_steps();
}

void CudaBackend::set_optimizer_steps(int64_t steps) {
  for (auto& [k, m] : stages_) m->set_optimizer_steps(steps);
  if (!views_current_) return;
  // A checkpoint was just read into CheckpointState's views: they become the device state.
  views_current_ = false;
  Status st = UploadCheckpointViews();
  if (!st.ok() && deferred_.ok()) deferred_ = Status(st.code(), "restoring a checkpoint: " + st.message());
}

Result<std::unique_ptr<CudaBackend>> MakeCudaBackend(const v1::Assignment& a, const CudaBackendOptions& options) {
  const v1::ModelSpec& ms = a.spec().model();
  const model::ModelConfig config = ModelConfigOf(ms);
  const model::BatchShape batch = BatchShapeOf(a.spec());
  PIPECOORD_RETURN_IF_ERROR(config.Validate());
  PIPECOORD_RETURN_IF_ERROR(batch.Validate());
  for (const v1::StageShard& s : a.shards()) PIPECOORD_RETURN_IF_ERROR(model::ValidateShard(config, StageShardOf(s)));
  // JobSpec.precision ("" is fp32).
  auto parsed = ParsePrecision(a.spec().precision());
  if (!parsed.ok()) return Status(parsed.status().code(), "spec." + parsed.status().message());
  const Precision precision = *parsed;
  std::shared_ptr<CudaDevice> device = options.shared_device;
  if (device == nullptr) {
    auto opened = CudaDevice::Open(options.device);
    if (!opened.ok()) return opened.status();
    device = std::move(opened).value();
  }
  auto data = TrainingData::Open(a.spec(), a.dp_rank());
  if (!data.ok()) return data.status();
  std::unique_ptr<CudaBackend> backend(new CudaBackend(
      a, std::move(data).value(),
      precision, std::move(device)));
  const int tp = std::max(1, a.spec().tp());
  parallel::TensorParallel* group = options.tensor_parallel;
  if (tp > 1 && (group == nullptr || group->size() != tp)) {
    return InvalidArgument("spec.tp is " + std::to_string(tp) + ": the rank needs its tensor-parallel group");
  }
  for (const v1::StageShard& s : a.shards()) {
    auto stage = CudaStageModel::Create(config, StageShardOf(s), batch, precision, backend->device_.get(),
                                        tp > 1 ? group : nullptr, tp > 1 && a.spec().sequence_parallel());
    if (!stage.ok()) return stage.status();
    backend->stages_[s.stage()] = std::move(stage).value();
  }
  const int dp = std::max(1, a.spec().dp());
  if (a.spec().zero() >= 1 && dp > 1) {
    for (auto& [k, m] : backend->stages_) {
      PIPECOORD_RETURN_IF_ERROR(m->ShardOptimizerStates(dp, a.dp_rank(), a.spec().zero() >= 2));
    }
  }
  const model::Recompute r = model::RecomputeOf(a.spec().recompute());
  // The replay probe's hash slots: one per F a PROBE replays, and one for the replay's output.
  bool replays = false;
  for (const v1::Action& act : a.jobs().actions()) {
    if (act.op() != v1::PROBE) continue;
    if (act.microbatch() >= 0) {
      backend->replay_slot_.emplace(std::make_pair(act.stage(), act.microbatch()),
                                    static_cast<int>(backend->replay_slot_.size()));
    }
    replays = replays || act.microbatch() >= 0 || act.microbatch() == jobplan::kSeededReplay;
  }
  if (replays) {
    const auto bytes = static_cast<int64_t>(sizeof(uint64_t) * (backend->replay_slot_.size() + 1));
    auto hashes = backend->device_->Zeros({kernels::DType::kU8, {bytes}});
    if (!hashes.ok()) return hashes.status();
    backend->hashes_ = std::move(hashes).value();
  }
  CudaBackend* b = backend.get();
  for (auto& [k, m] : backend->stages_) {
    PIPECOORD_RETURN_IF_ERROR(m->SetRecompute(r));
    m->set_recompute_marker([b](bool begin) { return b->RecordRecompute(begin); });
  }
  return backend;
}

}  // namespace pipecoord::worker::cuda
