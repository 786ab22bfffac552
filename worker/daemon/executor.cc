#include "worker/daemon/executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "jobplan/data_spec.h"
#include "jobplan/probe_placement.h"
#include "proto/op_kinds.h"
#include "worker/parallel/collectives.h"

namespace pipecoord::worker {
namespace {

constexpr uint32_t kActivations = 0, kGradients = 1;
// Validation activations: between pipeline neighbours of one replica, never the all-reduce's
// peers, on a channel of their own so they cannot be taken for a step's.
constexpr uint32_t kValidationActivations = 64;
// REDUCE_GRAD's all-reduce of stage s on channel kStageGradientChannel + s: each stage's on its
// own, so two in flight between the same replicas never share a tag.
constexpr uint32_t kStageGradientChannel = 1u << 16;
// ZeRO's all-gather of stage s's updated values, on channel kParameterGatherChannel + s.
constexpr uint32_t kParameterGatherChannel = 2u << 16;
// The global gradient norm's all-reduce (one float): over the replica, then (ZeRO) over the
// data-parallel group on kGradNormChannel + 1.
constexpr uint32_t kGradNormChannel = 3u << 16;
// The step commit's all-gathers (executor.h): the replica's, then the data-parallel group's on
// kCommitChannel + 1.
constexpr uint32_t kCommitChannel = 4u << 16;
// The all-gather of every stage's values after a load wrote one shard only (ValuesNeedGather),
// on channel kLoadGatherChannel + s, before the first step.
constexpr uint32_t kLoadGatherChannel = 5u << 16;
// Tied embeddings: the embedding's and the head copy's gradients summed over the embedding group.
constexpr uint32_t kTiedEmbeddingChannel = 6u << 16;
// Floats each rank puts in the commit: [holds a loss, the loss's 8 bytes as two floats, 0].
constexpr size_t kCommitFloats = 4;
// The commits whose losses a rank keeps for the coordinator: as far back as a lost rank's
// telemetry may lag behind its steps (on a loaded 2-core machine, seen 6 steps; a few doubles per
// commit: the ranks that hold a loss).
constexpr int kCommitsKept = 128;


std::string Describe(const v1::Action& a) {
  return std::to_string(a.stage()) + v1::Op_Name(a.op()) + std::to_string(a.microbatch());
}

}  // namespace

Executor::Executor(const v1::Assignment& a, ComputeBackend* backend, Transport* transport, ExecutorOptions options)
    : a_(a), backend_(backend), transport_(transport), options_(std::move(options)),
      layout_(jobplan::LayoutOf(a.spec())) {
  global_ = layout_.Global({a.rank(), a.dp_rank(), a.tp_rank()});
  dp_ = layout_.dp();
  rank_ = a.rank();
  dp_rank_ = a.dp_rank();
  data_group_ = layout_.DataGroup(global_);
  stages_ = a.stage_to_rank_size();
  mbs_ = a.spec().microbatches();
  stage_to_rank_.assign(a.stage_to_rank().begin(), a.stage_to_rank().end());
  const size_t slots = static_cast<size_t>(stages_) * mbs_;
  local_act_.resize(slots);
  local_grad_.resize(slots);
  out_act_.resize(slots);
  out_grad_.resize(slots);
  device_timing_ = backend_->TimesOnDevice();
  for (const v1::Action& act : a.jobs().actions()) reduces_by_stage_ = reduces_by_stage_ || act.op() == v1::REDUCE_GRAD;
  zero_ = a.spec().zero() >= 1 && dp_ > 1;
  for (const v1::StageShard& shard : a.shards()) stages_held_.push_back(shard.stage());
  replica_group_.ranks = layout_.ReplicaGroup(global_);
  replica_group_.me = global_ - replica_group_.ranks[0];
  std::sort(stages_held_.begin(), stages_held_.end());
  if (a.spec().model().tied_embeddings() && stages_ > 1) {
    const int first = stage_to_rank_[0], last = stage_to_rank_[stages_ - 1];
    if (rank_ == first || rank_ == last) {
      tied_group_.ranks = {Global(first), Global(last)};  // one rank for both: summed here
      tied_group_.me = rank_ == first ? 0 : 1;
    }
  }
  first_step_ = a.start_step();
  applied_step_ = reported_through_ = a.start_step() - 1;
  commit_.set_committed_step(a.start_step() - 1);
  commit_.set_prepared_step(-1);
  commit_.set_in_flight_step(-1);
  if (!options_.clock_ns) {
    options_.clock_ns = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::system_clock::now().time_since_epoch()).count();
    };
  }
}

Executor::~Executor() {
  for (const StageReduce& r : stage_reduces_) r.done.wait();
}

Status Executor::LaunchStageReduce(int stage, int step, size_t entry) {
  auto grads = backend_->StageGradients(stage);
  if (!grads.ok()) return grads.status();
  std::vector<int> group = data_group_;
  std::shared_future<StageReduce::Done> before;
  if (!stage_reduces_.empty()) before = stage_reduces_.back().done;
  StageReduce r;
  r.stage = stage;
  r.entry = entry;
  r.launched_ns = options_.clock_ns();
  r.launched = std::chrono::steady_clock::now();
  r.done = std::async(std::launch::async,
                      [transport = transport_, me = dp_rank_, group = std::move(group), step, stage,
                       grads = std::move(grads).value(), timeout = options_.recv_timeout, before, zero = zero_] {
                        if (before.valid()) before.wait();  // one at a time, in list order
                        StageReduce::Done d;
                        d.start = std::chrono::steady_clock::now();
                        const parallel::RingOptions ring{timeout, kStageGradientChannel + static_cast<uint32_t>(stage),
                                                         &d.bytes_sent};
                        d.status = zero ? parallel::ReduceScatterMean(*transport, parallel::Group{group, me}, step, grads, ring)
                                        : parallel::AllReduceMean(*transport, parallel::Group{group, me}, step, grads, ring);
                        d.end = std::chrono::steady_clock::now();
                        return d;
                      })
               .share();
  stage_reduces_.push_back(std::move(r));
  return Status::Ok();
}

Status Executor::FinishStageReduces(StepReport* report) {
  Status first;
  for (const StageReduce& r : stage_reduces_) {
    const StageReduce::Done& d = r.done.get();
    auto on_clock = [&](std::chrono::steady_clock::time_point t) {
      return r.launched_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(t - r.launched).count();
    };
    v1::ActionTiming& t = report->actions[r.entry];
    t.set_start_ns(on_clock(d.start));
    t.set_end_ns(std::max(t.start_ns(), on_clock(d.end)));
    t.set_dp_comm_bytes(d.bytes_sent);
    if (!d.status.ok() && first.ok()) {
      first = Status(d.status.code(), "the gradient all-reduce of stage " + std::to_string(r.stage) + " (its REDUCE_GRAD, " +
                                          std::to_string(r.stage) + "REDUCE_GRAD): " + d.status.message());
    }
  }
  stage_reduces_.clear();
  return first;
}

Status Executor::GlobalNormAndClip(int step) {
  learning_rate_ = AdamWOptionsAt(a_.spec(), backend_->optimizer_steps()).lr;
  has_grad_norm_ = false;
  auto sum = backend_->GradientSquareSum(a_.tp_rank() == 0);
  const double clip = a_.spec().optimizer().clip_grad_norm();
  if (!sum.ok()) {
    if (sum.status().code() == Code::kUnimplemented && clip == 0) return Status::Ok();  // no norm to report
    return Status(sum.status().code(), "the gradient norm: " + sum.status().message());
  }
  // Every element of the model once: the replica's ranks together hold it all, or, under ZeRO,
  // every rank its shard (summed over the replica, then over the data-parallel group).
  float total = static_cast<float>(*sum);
  parallel::HostFloats one(std::span<float>(&total, 1));
  Transport& host = HostTransport();
  Status st = parallel::AllReduceSum(host, replica_group_, step, one, {options_.recv_timeout, kGradNormChannel});
  if (st.ok() && zero_) {
    st = parallel::AllReduceSum(host, parallel::Group{data_group_, dp_rank_}, step, one,
                                {options_.recv_timeout, kGradNormChannel + 1});
  }
  if (!st.ok()) return Status(st.code(), "the gradient norm's all-reduce: " + st.message());
  grad_norm_ = std::sqrt(static_cast<double>(total));
  has_grad_norm_ = true;
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1.
  if (clip > 0) {
    const float coef = static_cast<float>(clip / (grad_norm_ + 1e-6));
    if (coef < 1.0f) PIPECOORD_RETURN_IF_ERROR(backend_->ScaleGradients(coef));
  }
  return Status::Ok();
}

Status Executor::OptimizerStepWithDataParallel(int step, uint64_t* bytes) {
  const parallel::Group group{data_group_, dp_rank_};
  if (reduces_by_stage_) {
    // every stage's REDUCE_GRAD reduced its gradients already
  } else if (zero_) {
    // Each stage's shard, as its REDUCE_GRAD would have: on the device's buffer where the backend
    // keeps its gradients there, else on its host spans.
    for (int s : stages_held_) {
      const parallel::RingOptions ring{options_.recv_timeout, kStageGradientChannel + static_cast<uint32_t>(s), bytes};
      if (parallel::FloatBuffer* device = backend_->DeviceStageGradients(s); device != nullptr) {
        PIPECOORD_RETURN_IF_ERROR(parallel::ReduceScatterMean(*transport_, group, step, *device, ring));
        continue;
      }
      auto grads = backend_->StageGradients(s);
      if (!grads.ok()) return grads.status();
      PIPECOORD_RETURN_IF_ERROR(parallel::ReduceScatterMean(*transport_, group, step, std::move(grads).value(), ring));
    }
  } else if (dp_ > 1 && backend_->DeviceGradients() != nullptr) {
    // The same ring on the device: chunks read out and added in by the backend's kernels.
    parallel::FloatBuffer& grads = *backend_->DeviceGradients();
    PIPECOORD_RETURN_IF_ERROR(parallel::AllReduceSum(*transport_, group, step, grads, {options_.recv_timeout,
                                                                                        kFirstCollectiveChannel, bytes}));
    PIPECOORD_RETURN_IF_ERROR(grads.Scale(0, grads.size(), 1.0f / static_cast<float>(dp_)));
  } else if (dp_ > 1) {
    // Gradients were accumulated over the step's micro-batches; one all-reduce now.
    PIPECOORD_RETURN_IF_ERROR(parallel::AllReduceMean(*transport_, group, step, backend_->Gradients(),
                                                      {options_.recv_timeout, kFirstCollectiveChannel, bytes}));
  }
  PIPECOORD_RETURN_IF_ERROR(SumTiedEmbeddingGradients(step, bytes));
  PIPECOORD_RETURN_IF_ERROR(backend_->FinalizeGradients());
  PIPECOORD_RETURN_IF_ERROR(GlobalNormAndClip(step));
  if (options_.commit) PIPECOORD_RETURN_IF_ERROR(Commit(step));
  PIPECOORD_RETURN_IF_ERROR(backend_->OptimizerStep(step));
  applied_step_ = step;
  if (!options_.commit) {
    // No commit: the last step applied (consistent across ranks when they all stopped after it).
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_.set_committed_step(step);
  }
  if (!zero_) return Status::Ok();
  // Every replica updated its own chunk of each stage; the all-gather gives each all of them.
  return GatherParameters(step, kParameterGatherChannel, bytes);
}

Status Executor::SumTiedEmbeddingGradients(int step, uint64_t* bytes) {
  if (tied_group_.ranks.empty()) return Status::Ok();
  auto fail = [](const Status& st) {
    return Status(st.code(), "the tied embedding's gradient sum (embedding group): " + st.message());
  };
  if (tied_group_.ranks[0] == tied_group_.ranks[1]) {
    // Both stages on this rank (a V schedule's rank 0): embedding's + copy's (one f32 addition),
    // the same bits to both.
    parallel::FloatBuffer* de = backend_->DeviceTiedEmbeddingGradient(0);
    parallel::FloatBuffer* dh = de != nullptr ? backend_->DeviceTiedEmbeddingGradient(stages_ - 1) : nullptr;
    if (de != nullptr && dh != nullptr) {  // on the device: the copy read out and added in, the sum written back
      if (de->size() != dh->size()) return fail(Internal("the embedding and its copy differ in size"));
      {
        auto copy = dh->Read(0, dh->size());
        if (!copy.ok()) return fail(copy.status());
        Status st = de->Add(0, *copy);
        if (!st.ok()) return fail(st);
      }
      auto sum = de->Read(0, de->size());
      if (!sum.ok()) return fail(sum.status());
      Status st = dh->Write(0, *sum);
      return st.ok() ? st : fail(st);
    }
    auto e = backend_->TiedEmbeddingGradient(0);
    if (!e.ok()) return fail(e.status());
    auto h = backend_->TiedEmbeddingGradient(stages_ - 1);
    if (!h.ok()) return fail(h.status());
    if (e->size() != h->size()) return fail(Internal("the embedding and its copy differ in size"));
    for (size_t i = 0; i < e->size(); ++i) (*h)[i] = (*e)[i] = (*e)[i] + (*h)[i];
    return Status::Ok();
  }
  // Two ranks: an all-reduce of two members leaves the same sum on both (a + b = b + a exactly), on
  // the device's buffer where the backend keeps the gradient there, else on the host span.
  const int mine = tied_group_.me == 0 ? 0 : stages_ - 1;
  parallel::FloatBuffer* buffer = backend_->DeviceTiedEmbeddingGradient(mine);
  std::unique_ptr<parallel::HostFloats> host;
  if (buffer == nullptr) {
    auto g = backend_->TiedEmbeddingGradient(mine);
    if (!g.ok()) return fail(g.status());
    host = std::make_unique<parallel::HostFloats>(*g);
    buffer = host.get();
  }
  Status st = parallel::AllReduceSum(*transport_, tied_group_, step, *buffer, {options_.recv_timeout, kTiedEmbeddingChannel, bytes});
  return st.ok() ? st : fail(st);
}

Status Executor::GatherParameters(int step, uint32_t channel, uint64_t* bytes) {
  const parallel::Group group{data_group_, dp_rank_};
  for (int s : stages_held_) {
    const parallel::RingOptions options{options_.recv_timeout, channel + static_cast<uint32_t>(s), bytes};
    Status st;
    if (parallel::FloatBuffer* device = backend_->DeviceStageValues(s); device != nullptr) {
      st = parallel::AllGather(*transport_, group, step, *device, options);
    } else {
      auto values = backend_->StageValues(s);
      if (!values.ok()) return values.status();
      parallel::HostFloats buffer(std::move(values).value());
      st = parallel::AllGather(*transport_, group, step, buffer, options);
    }
    if (!st.ok()) return Status(st.code(), "ZeRO's parameter all-gather of stage " + std::to_string(s) + ": " + st.message());
  }
  return backend_->ParametersGathered();
}

Status Executor::Commit(int step) {
  step_has_loss_ = backend_->StepLoss(&step_loss_);
  const int world = layout_.world();
  std::vector<float> all(kCommitFloats * static_cast<size_t>(world), 0.0f);
  float* mine = all.data() + kCommitFloats * static_cast<size_t>(global_);
  mine[0] = step_has_loss_ ? 1.0f : 0.0f;
  std::memcpy(mine + 1, &step_loss_, sizeof(double));  // moved, never added: the bits arrive as sent
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_.set_prepared_step(step);
  }
  // The replica's floats (a contiguous range: its ranks are consecutive in global order), then every
  // replica's from the data-parallel group's members, which sit at the same place in theirs.
  const size_t replica = replica_group_.ranks.size();
  parallel::HostFloats mine_replica{
      std::span<float>(all).subspan(kCommitFloats * static_cast<size_t>(replica_group_.ranks[0]), kCommitFloats * replica)};
  Transport& host = HostTransport();
  Status st = parallel::AllGather(host, replica_group_, step, mine_replica, {options_.recv_timeout, kCommitChannel});
  if (st.ok()) {
    parallel::HostFloats everyone{std::span<float>(all)};
    st = parallel::AllGather(host, parallel::Group{data_group_, dp_rank_}, step, everyone,
                             {options_.recv_timeout, kCommitChannel + 1});
  }
  if (!st.ok()) return Status(st.code(), "the step commit: " + st.message());
  std::lock_guard<std::mutex> lock(commit_mu_);
  commit_.set_committed_step(step);
  commit_.set_prepared_step(-1);
  v1::CommitLosses* losses = commit_.add_losses();
  losses->set_step(step);
  for (int g = 0; g < world; ++g) {
    const float* theirs = all.data() + kCommitFloats * static_cast<size_t>(g);
    if (theirs[0] == 0.0f) continue;
    double loss = 0;
    std::memcpy(&loss, theirs + 1, sizeof(double));
    losses->add_global_rank(g);
    losses->add_loss(loss);
  }
  if (commit_.losses_size() > kCommitsKept) commit_.mutable_losses()->DeleteSubrange(0, 1);
  return Status::Ok();
}

v1::CommitState Executor::commit_state() const {
  std::lock_guard<std::mutex> lock(commit_mu_);
  return commit_;
}

Status Executor::ResumeAt(int resume_step, Transport* transport, const std::function<Status(StepReport&&)>& on_step) {
  if (!stage_reduces_.empty()) (void)FinishStageReduces(&current_);  // they ended with the old data plane
  const int last = resume_step - 1;
  const v1::CommitState c = commit_state();
  const std::string where = "resuming at step " + std::to_string(resume_step) + ": this rank committed step " +
                            std::to_string(c.committed_step()) +
                            (c.prepared_step() >= 0 ? " and waited in step " + std::to_string(c.prepared_step()) + "'s commit" : "");
  if (last < c.committed_step() || (last > c.committed_step() && c.prepared_step() != last)) {
    return FailedPrecondition(where);
  }
  if (applied_step_ < last) {
    // Another rank passed this step's commit, so every rank had entered it with all it needs.
    PIPECOORD_RETURN_IF_ERROR(backend_->OptimizerStep(last));
    applied_step_ = last;
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_.set_committed_step(last);
    commit_.set_prepared_step(-1);
  }
  if (reported_through_ < last) {
    if (current_step_ != last) return Internal(where + ", but its report of step " + std::to_string(last) + " is gone");
    bool stopping = false;
    PIPECOORD_RETURN_IF_ERROR(FinishStep(last, &current_, /*validate=*/false, on_step, &stopping));
  }
  PIPECOORD_RETURN_IF_ERROR(backend_->AbortStep());
  for (auto* slots : {&local_act_, &local_grad_, &out_act_, &out_grad_}) {
    for (kernels::Tensor& t : *slots) t = kernels::Tensor();
  }
  device_timed_.clear();
  current_ = StepReport();
  current_step_ = -1;
  {
    std::lock_guard<std::mutex> lock(commit_mu_);
    commit_.set_in_flight_step(-1);
  }
  transport_ = transport;
  first_step_ = resume_step;
  cancelled_ = false;
  return Status::Ok();
}

Result<kernels::Tensor> Executor::Input(int producer, int consumer, int mb, int step, uint32_t channel) {
  if (producer < 0 || producer >= stages_) return kernels::Tensor();  // model input or loss
  if (stage_to_rank_[producer] == rank_) {
    auto& slot = (channel == kActivations ? local_act_ : local_grad_)[Key(consumer, mb)];
    return std::move(slot);
  }
  return transport_->Recv(Global(stage_to_rank_[producer]), MessageTag{channel, consumer, mb, step},
                          backend_->BoundarySpec(), options_.recv_timeout);
}

int Executor::InputPeer(const v1::Action& a) const {
  int producer = -1;
  if (a.op() == v1::F) producer = a.stage() - 1;
  if (a.op() == v1::B || a.op() == v1::BW) producer = a.stage() + 1 < stages_ ? a.stage() + 1 : -1;
  if (producer < 0 || producer >= stages_ || stage_to_rank_[producer] == rank_) return -1;
  return stage_to_rank_[producer];
}

Status Executor::RunAction(const v1::Action& a, int step, StepReport* report) {
  const int s = a.stage(), mb = a.microbatch();
  int64_t start = options_.clock_ns();
  const int64_t wait_start = start;
  RunHooks* hooks = options_.hooks;
  uint64_t probe_checksum = 0;
  std::optional<ComputeBackend::Replay> replay;  // PROBE naming an F: the replay probe's result
  const bool compute = v1::IsCompute(a.op());
  uint64_t dp_bytes = 0;  // OPT: sent in the data-parallel reduction and gather
  const parallel::TensorParallel* tp = options_.tensor_parallel;
  const int64_t tp_ns_before = tp != nullptr ? tp->comm_ns() : 0;
  const int64_t recompute_ns_before = compute ? backend_->recompute_ns() : 0;
  const uint64_t tp_bytes_before = tp != nullptr ? tp->bytes_sent() : 0;
  // Timed on the device: its mark brackets the hooks too (they are inside the measured time).
  const bool on_device = device_timing_ && (compute || a.op() == v1::OPT);
  const int mark = static_cast<int>(device_timed_.size());
  // Health hooks around a compute kernel: input there, injected faults before and after.
  auto begin = [&]() -> Status {
    start = options_.clock_ns();
    if (on_device) PIPECOORD_RETURN_IF_ERROR(backend_->MarkBegin(mark));
    if (hooks == nullptr) return Status::Ok();
    hooks->OnInputReady();
    return hooks->BeforeCompute(step, a, cancelled_);
  };
  auto end = [&]() -> Status {
    if (hooks != nullptr) hooks->AfterCompute(step, a, options_.clock_ns() - start);
    return on_device ? backend_->MarkEnd(mark) : Status::Ok();
  };
  // A compute action's clock starts once its input is there: waiting is idle, not busy.
  switch (a.op()) {
    case v1::F: {
      auto in = Input(s - 1, s, mb, step, kActivations);
      if (!in.ok()) return in.status();
      PIPECOORD_RETURN_IF_ERROR(begin());
      auto out = backend_->Forward(s, mb, step, std::move(in).value());
      if (!out.ok()) return out.status();
      PIPECOORD_RETURN_IF_ERROR(end());
      if (s + 1 < stages_) {
        (stage_to_rank_[s + 1] == rank_ ? local_act_[Key(s + 1, mb)] : out_act_[Key(s, mb)]) = std::move(out).value();
      }
      break;
    }
    case v1::B:
    case v1::BW: {
      auto grad = Input(s + 1 < stages_ ? s + 1 : -1, s, mb, step, kGradients);
      if (!grad.ok()) return grad.status();
      PIPECOORD_RETURN_IF_ERROR(begin());
      auto out = a.op() == v1::B ? backend_->BackwardInput(s, mb, std::move(grad).value())
                                 : backend_->BackwardFull(s, mb, std::move(grad).value());
      if (!out.ok()) return out.status();
      PIPECOORD_RETURN_IF_ERROR(end());
      if (s > 0) {
        (stage_to_rank_[s - 1] == rank_ ? local_grad_[Key(s - 1, mb)] : out_grad_[Key(s, mb)]) = std::move(out).value();
      }
      break;
    }
    case v1::W:
      PIPECOORD_RETURN_IF_ERROR(begin());
      PIPECOORD_RETURN_IF_ERROR(backend_->BackwardWeight(s, mb));
      PIPECOORD_RETURN_IF_ERROR(end());
      break;
    case v1::SEND_F:
      PIPECOORD_RETURN_IF_ERROR(transport_->Send(Global(a.peer()), MessageTag{kActivations, s + 1, mb, step},
                                                 std::move(out_act_[Key(s, mb)])));
      break;
    case v1::SEND_B:
      PIPECOORD_RETURN_IF_ERROR(transport_->Send(Global(a.peer()), MessageTag{kGradients, s - 1, mb, step},
                                                 std::move(out_grad_[Key(s, mb)])));
      break;
    case v1::RECV_F:
    case v1::RECV_B:
      break;  // receives are posted by the transport already
    case v1::PROBE:
      if (hooks != nullptr) {  // checked by the coordinator
        auto probe = hooks->Probe(step, [this](const kernels::cpu::ProbeShape& shape, const std::vector<float>& x,
                                               const std::vector<float>& w, std::vector<float>* y) {
          return backend_->ProbeGemm(shape, x, w, y);
        });
        if (!probe.ok()) return probe.status();
        probe_checksum = *probe;
      }
      // The replay runs whenever the plan names one, hooks or not: with tp every rank of the group
      // must run its collectives together.
      if (mb >= 0) {  // the plan names an F to replay
        auto r = backend_->ReplayForward(s, mb, step);
        if (r.ok()) {
          replay = *r;
        } else if (r.status().code() != Code::kUnimplemented) {
          return r.status();
        }
      } else if (mb == jobplan::kSeededReplay) {  // the seeded forward the replicas compare
        auto r = backend_->SeededForward(s, step);
        if (r.ok()) {
          replay = ComputeBackend::Replay{s, mb, 0, *r};
        } else if (r.status().code() != Code::kUnimplemented) {
          return r.status();
        }
      }
      break;
    case v1::OPT: {
      // Stage by stage: the reductions ran in the background; waiting for them is idle time.
      PIPECOORD_RETURN_IF_ERROR(FinishStageReduces(report));
      start = options_.clock_ns();
      if (on_device) PIPECOORD_RETURN_IF_ERROR(backend_->MarkBegin(mark));
      PIPECOORD_RETURN_IF_ERROR(OptimizerStepWithDataParallel(step, &dp_bytes));
      if (on_device) PIPECOORD_RETURN_IF_ERROR(backend_->MarkEnd(mark));
      break;
    }
    case v1::REDUCE_GRAD:
      if (backend_->DeviceGradients() != nullptr) {
        return Unimplemented("action " + Describe(a) + ": this backend's gradients live on its device and are "
                             "all-reduced at OPT; it does not run REDUCE_GRAD (jobplan plans none for cuda jobs)");
      }
      // Timed by the background all-reduce (FinishStageReduces); a group of one has none.
      if (dp_ > 1) PIPECOORD_RETURN_IF_ERROR(LaunchStageReduce(s, step, report->actions.size()));
      break;
    case v1::OVERLAP_F_B:
      // Opens a slot: the F and the backward after it in the list run one after the other, as
      // PyTorch's runtime runs them without a custom overlap function (a CPU has nothing to
      // overlap them on). Reported with no duration, so the trace shows where the slot was.
      break;
    case v1::UNSHARD:
    case v1::RESHARD:
      // PyTorch's FSDP actions travel on the wire (an imported CSV's) but no backend runs them;
      // the coordinator refuses such plans (jobplan::CheckWorkersRun), so this is a bad plan.
      return Unimplemented("action " + Describe(a) + ": this worker does not run " + v1::Op_Name(a.op()) +
                           " (it runs F, B, W, BW, SEND/RECV, PROBE, OPT, REDUCE_GRAD and OVERLAP_F_B)");
    default:
      return InvalidArgument("unknown op " + std::to_string(a.op()));
  }
  v1::ActionTiming* t = &report->actions.emplace_back();
  *t->mutable_action() = a;
  t->set_step(step);
  t->set_start_ns(start);
  // The clock is the wall clock plus the estimated offset: either may step back a little
  // (a better offset sample, a clock adjustment); a duration never goes negative.
  t->set_end_ns(std::max(start, options_.clock_ns()));
  t->set_wait_ns(compute ? std::max<int64_t>(0, start - wait_start) : 0);
  t->set_wait_peer(compute ? InputPeer(a) : -1);
  // Host times until the step's end replaces them (ResolveDeviceTimes).
  if (on_device) device_timed_.push_back({report->actions.size() - 1, wait_start, compute ? start : wait_start});
  if (a.op() == v1::PROBE) t->set_probe_checksum(probe_checksum);
  if (replay) {
    v1::ProbeReplay* r = t->mutable_replay();
    r->set_stage(replay->stage);
    r->set_microbatch(replay->microbatch);
    r->set_original_checksum(replay->original);
    r->set_replay_checksum(replay->replay);
    r->set_seeded(replay->microbatch == jobplan::kSeededReplay);
  }
  if (dp_bytes > 0) t->set_dp_comm_bytes(dp_bytes);
  if (compute) t->set_recompute_ns(backend_->recompute_ns() - recompute_ns_before);
  if (tp != nullptr && compute) {
    t->set_tp_comm_ns(tp->comm_ns() - tp_ns_before);
    t->set_tp_comm_bytes(tp->bytes_sent() - tp_bytes_before);
  }
  if (hooks != nullptr) hooks->OnActionDone();
  return Status::Ok();
}

Result<std::optional<double>> Executor::RunValidation(int step) {
  const int batches = std::max(1, a_.spec().eval_batches());
  for (int k = 0; k < batches; ++k) {
    kernels::Tensor local;  // the previous stage's output when that stage is on this rank too
    for (int s = 0; s < stages_; ++s) {
      if (stage_to_rank_[s] != rank_) continue;
      if (cancelled_) return FailedPrecondition("cancelled");
      kernels::Tensor in;
      if (s > 0 && stage_to_rank_[s - 1] == rank_) {
        in = std::move(local);
      } else if (s > 0) {
        auto r = transport_->Recv(Global(stage_to_rank_[s - 1]), MessageTag{kValidationActivations, s, k, step},
                                  backend_->BoundarySpec(), options_.recv_timeout);
        if (!r.ok()) return Status(r.status().code(), "validation batch " + std::to_string(k) + ", stage " +
                                                          std::to_string(s) + ": " + r.status().message());
        in = std::move(r).value();
      }
      auto out = backend_->Evaluate(s, k, std::move(in));
      if (!out.ok()) return Status(out.status().code(), "validation batch " + std::to_string(k) + ", stage " +
                                                            std::to_string(s) + ": " + out.status().message());
      if (s + 1 >= stages_) continue;
      if (stage_to_rank_[s + 1] == rank_) {
        local = std::move(out).value();
      } else {
        PIPECOORD_RETURN_IF_ERROR(transport_->Send(Global(stage_to_rank_[s + 1]),
                                                   MessageTag{kValidationActivations, s + 1, k, step},
                                                   std::move(out).value()));
      }
    }
  }
  double loss = 0;
  if (backend_->TakeValidationLoss(&loss)) return std::optional<double>(loss);
  return std::optional<double>();
}

Status Executor::ResolveDeviceTimes(StepReport* report) {
  const int count = static_cast<int>(device_timed_.size());
  auto spans = backend_->ResolveMarks(count, options_.clock_ns);
  if (!spans.ok()) return Status(spans.status().code(), "device timing: " + spans.status().message());
  if (spans->size() != device_timed_.size()) {
    return Internal("device timing: the backend resolved " + std::to_string(spans->size()) + " spans for " +
                    std::to_string(count) + " marks");
  }
  for (size_t k = 0; k < device_timed_.size(); ++k) {
    const DeviceTimed& d = device_timed_[k];
    const DeviceSpan& span = (*spans)[k];
    v1::ActionTiming& t = report->actions[d.entry];
    t.set_start_ns(span.start_ns);
    t.set_end_ns(std::max(span.start_ns, span.end_ns));
    if (span.recompute_ns > 0) t.set_recompute_ns(span.recompute_ns);
    if (v1::IsCompute(t.action().op())) {
      // The device idled over [device_free_since_, start]; the part of it spent waiting for
      // the input, [wait_from, input_at], is the wait.
      const int64_t idle_from = std::max(device_free_since_, d.wait_from);
      const int64_t idle_to = std::min(span.start_ns, d.input_at);
      t.set_wait_ns(std::max<int64_t>(0, idle_to - idle_from));
    }
    device_free_since_ = t.end_ns();
  }
  device_timed_.clear();
  return Status::Ok();
}

Status Executor::Run(const std::function<Status(StepReport&&)>& on_step) {
  if (zero_ && first_step_ < a_.spec().steps() && backend_->ValuesNeedGather()) {
    Status st = GatherParameters(first_step_, kLoadGatherChannel, nullptr);
    if (!st.ok()) return Status(st.code(), "before step " + std::to_string(first_step_) + ": " + st.message());
  }
  for (int step = first_step_; step < a_.spec().steps(); ++step) {
    current_ = StepReport();
    current_.actions.reserve(a_.jobs().actions_size());
    current_step_ = step;
    step_has_loss_ = false;
    {
      std::lock_guard<std::mutex> lock(commit_mu_);
      commit_.set_in_flight_step(step);
    }
    backend_->ResetPeak();
    device_timed_.clear();  // what a failed step left
    if (const uint64_t oom = options_.hooks != nullptr ? options_.hooks->OomBytes(step) : 0; oom > 0) {
      if (Status held = backend_->HoldBytes(oom); !held.ok()) {
        return Status(held.code(), "step " + std::to_string(step) + ": the oom fault's " + std::to_string(oom) +
                                       " bytes: " + held.message());
      }
    }
    for (int i = 0; i < a_.jobs().actions_size(); ++i) {
      if (cancelled_) return FailedPrecondition("cancelled");
      const v1::Action& act = a_.jobs().actions(i);
      if (options_.hooks != nullptr) options_.hooks->OnActionStart(step, i, act, InputPeer(act));
      Status st = RunAction(act, step, &current_);
      if (!st.ok()) {
        if (cancelled_) return FailedPrecondition("cancelled");
        return Status(st.code(), "step " + std::to_string(step) + ", position " + std::to_string(i) + " (" +
                                     Describe(act) + "): " + st.message());
      }
    }
    if (!stage_reduces_.empty()) {  // a list with REDUCE_GRAD and no OPT after them
      Status st = FinishStageReduces(&current_);
      if (!st.ok()) return Status(st.code(), "step " + std::to_string(step) + ": " + st.message());
    }
    if (!device_timed_.empty()) {
      Status st = ResolveDeviceTimes(&current_);
      if (!st.ok()) return Status(st.code(), "step " + std::to_string(step) + ": " + st.message());
    }
    bool stopping = false;
    PIPECOORD_RETURN_IF_ERROR(FinishStep(step, &current_, /*validate=*/true, on_step, &stopping));
    current_step_ = -1;
    {
      std::lock_guard<std::mutex> lock(commit_mu_);
      commit_.set_in_flight_step(-1);
    }
    if (stopping) {
      transport_->Flush(options_.recv_timeout);  // what this step sent still reaches its peers
      return FailedPrecondition("shutting down: stopped after step " + std::to_string(step) + " of " +
                                std::to_string(a_.spec().steps()));
    }
  }
  return transport_->Flush(options_.recv_timeout);
}

Status Executor::FinishStep(int step, StepReport* report_in, bool validate, const std::function<Status(StepReport&&)>& on_step,
                            bool* stopping) {
  const int every = a_.spec().checkpoint_every();
  StepReport& report = *report_in;
  report.summary.set_step(step);
  if (has_grad_norm_) {
    report.summary.set_grad_norm(grad_norm_);
    report.summary.set_has_grad_norm(true);
  }
  report.summary.set_learning_rate(learning_rate_);
  double loss = 0;
  // With the commit, the loss was taken there (its bits are the ones every rank saw).
  const bool has_loss = options_.commit ? step_has_loss_ : backend_->StepLoss(&loss);
  if (options_.commit) loss = step_loss_;
  if (has_loss) {
    report.summary.set_loss(loss);
    report.summary.set_has_loss(true);
  }
  *stopping = step >= stop_after_step_ && step + 1 < a_.spec().steps();
  if (AsyncCheckpointWriter* ck = options_.checkpoints; ck != nullptr) {
    Status st;
    if (every > 0 && ((step + 1) % every == 0 || *stopping)) {
      st = ck->Save({step, backend_->optimizer_steps()}, backend_->CheckpointState());
    }
    // The run's last step waits for its checkpoint, so its report carries it.
    if (st.ok() && (*stopping || step + 1 == a_.spec().steps())) st = ck->Wait();
    auto durable = st.ok() ? ck->TakeDurable() : Result<std::vector<int64_t>>(st);
    if (!durable.ok()) return Status(durable.status().code(), "step " + std::to_string(step) + ": " + durable.status().message());
    for (int64_t s : *durable) report.summary.add_checkpointed_steps(static_cast<int32_t>(s));
  }
  report.summary.set_memory_in_use_bytes(backend_->memory_in_use_bytes());
  report.summary.set_memory_peak_bytes(backend_->memory_peak_bytes());
  report.summary.set_memory_reserved_bytes(backend_->memory_reserved_bytes());
  // After the memory figures: validation's activations are not the step's.
  if (validate && jobplan::EvaluatesAfter(a_.spec(), step)) {
    auto val = RunValidation(step);
    if (!val.ok()) {
      if (cancelled_) return FailedPrecondition("cancelled");
      return Status(val.status().code(), "step " + std::to_string(step) + ": " + val.status().message());
    }
    if (val->has_value()) {
      report.summary.set_val_loss(**val);
      report.summary.set_has_val_loss(true);
    }
  }
  // Reported once: a failure in on_step (a refused telemetry batch) is not retried by ResumeAt.
  reported_through_ = step;
  return on_step(std::move(report));
}

}  // namespace pipecoord::worker
