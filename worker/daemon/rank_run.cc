#include "worker/daemon/rank_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>

#include "jobplan/layout.h"
#include "jobplan/recovery.h"
#include "worker/daemon/backend_factory.h"
#include "worker/daemon/checkpointing.h"

namespace pipecoord::worker {
namespace {

// A tensor-parallel collective waits for the group's slowest rank to reach it: as long as a
// pipeline receive may wait (ExecutorOptions::recv_timeout's default).
constexpr std::chrono::milliseconds kTensorParallelTimeout{60000};
// A spare's state from its replica, tensor k on stage k (the executor's channels are below).
constexpr uint32_t kRecoveryStateChannel = 5u << 16;

}  // namespace

RankRun::RankRun(const v1::Assignment& assignment, RankRunOptions options)
    : assignment_(&assignment), options_(std::move(options)) {}

RankRun::~RankRun() = default;

int RankRun::GlobalRank(const v1::Assignment& a) {
  return jobplan::LayoutOf(a.spec()).Global({a.rank(), a.dp_rank(), a.tp_rank()});
}

std::vector<int> RankRun::TensorPeers(const v1::Assignment& a) {
  const RankLayout layout = jobplan::LayoutOf(a.spec());
  const int global = GlobalRank(a), dp = layout.dp();
  const int stages = a.stage_to_rank_size();
  std::set<int> peers;
  for (int s = 0; s < stages; ++s) {
    if (a.stage_to_rank(s) != a.rank()) continue;
    for (int next : {s - 1, s + 1}) {
      if (next >= 0 && next < stages && a.stage_to_rank(next) != a.rank()) {
        peers.insert(layout.AtPipelineRank(global, a.stage_to_rank(next)));
      }
    }
  }
  if (dp > 1) {
    for (int d : {a.dp_rank() - 1, a.dp_rank() + 1}) peers.insert(layout.AtDataRank(global, (d + dp) % dp));
  }
  // The tensor-parallel ring's neighbours: its collectives run on the same transport.
  const int tp = layout.tp();
  if (tp > 1) {
    for (int t : {a.tp_rank() - 1, a.tp_rank() + 1}) peers.insert(layout.Global({a.rank(), a.dp_rank(), (t + tp) % tp}));
  }
  return {peers.begin(), peers.end()};
}

uint64_t RankRun::DataSession(const v1::Assignment& a) {
  return jobplan::DataPlaneSession(a.session(), a.has_recovery() ? a.recovery().generation() : 0);
}

Status RankRun::SendState(TcpTransport& link, int peer, int step) {
  std::vector<StateTensor> state = backend_->CheckpointState();
  int32_t k = 0;
  for (const StateTensor& t : state) {
    PIPECOORD_RETURN_IF_ERROR(link.SendFloats(peer, MessageTag{kRecoveryStateChannel, k++, 0, step},
                                              std::vector<float>(t.data.begin(), t.data.end())));
    state_bytes_ += t.data.size_bytes();
  }
  const int64_t steps = backend_->optimizer_steps();
  std::vector<float> bits(2);
  std::memcpy(bits.data(), &steps, sizeof(steps));
  PIPECOORD_RETURN_IF_ERROR(link.SendFloats(peer, MessageTag{kRecoveryStateChannel, k, 0, step}, std::move(bits)));
  return link.Flush(options_.connect_timeout);
}

Status RankRun::ReceiveState(TcpTransport& link, int peer, int step) {
  std::vector<StateTensor> state = backend_->CheckpointState();
  int32_t k = 0;
  for (const StateTensor& t : state) {
    auto values = link.RecvFloats(peer, MessageTag{kRecoveryStateChannel, k++, 0, step}, t.data.size(),
                                  options_.connect_timeout);
    if (!values.ok()) {
      return Status(values.status().code(), "receiving " + t.name + " from global rank " + std::to_string(peer) + ": " +
                                                values.status().message());
    }
    std::copy(values->begin(), values->end(), t.data.begin());
    state_bytes_ += t.data.size_bytes();
  }
  auto bits = link.RecvFloats(peer, MessageTag{kRecoveryStateChannel, k, 0, step}, 2, options_.connect_timeout);
  if (!bits.ok()) return Status(bits.status().code(), "receiving the optimizer's step count: " + bits.status().message());
  int64_t steps = 0;
  std::memcpy(&steps, bits->data(), sizeof(steps));
  backend_->set_optimizer_steps(steps);
  return Status::Ok();
}

Status RankRun::Resume(const v1::Recovery& recovery, const TransportSource& source, const RankRunCallbacks& callbacks) {
  try {
    return ResumeOrThrow(recovery, source, callbacks);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while " + jobplan::LayoutOf(assignment_->spec()).Name(GlobalRank(*assignment_)) +
                             " recovered in place (std::bad_alloc)");
  }
}

Status RankRun::ResumeOrThrow(const v1::Recovery& recovery, const TransportSource& source, const RankRunCallbacks& callbacks) {
  if (executor_ == nullptr) return FailedPrecondition("recovering in place: this rank never started its steps");
  recovered_ = std::make_unique<v1::Assignment>(*assignment_);
  *recovered_->mutable_peers() = recovery.peers();
  *recovered_->mutable_recovery() = recovery;
  const v1::Assignment& a = *recovered_;
  auto connected = ConnectDataPlane(a, source, callbacks);
  if (!connected.ok()) return connected.status();
  TcpTransport* link = *connected;
  if (tensor_parallel_) tensor_parallel_->Bind(link);  // the group's calls count from 0 on the new plane
  PIPECOORD_RETURN_IF_ERROR(executor_->ResumeAt(recovery.resume_step(), link, callbacks.on_step));
  for (int spare : recovery.state_to()) {
    Status st = SendState(*link, spare, recovery.resume_step());
    if (!st.ok()) return Status(st.code(), "streaming the state to global rank " + std::to_string(spare) + ": " + st.message());
  }
  return executor_->Run(callbacks.on_step);
}

Status RankRun::Reshape(const v1::Assignment& reshaped, const TransportSource& source, const RankRunCallbacks& callbacks) {
  try {
    return ReshapeOrThrow(reshaped, source, callbacks);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory while " + jobplan::LayoutOf(reshaped.spec()).Name(GlobalRank(reshaped)) +
                             " took its place in the job's new plan (std::bad_alloc)");
  }
}

Status RankRun::ReshapeOrThrow(const v1::Assignment& b, const TransportSource& source, const RankRunCallbacks& callbacks) {
  if (executor_ == nullptr) return FailedPrecondition("reshaping in place: this rank never started its steps");
  const int resume = b.recovery().resume_step();
  // Where the old plan stops: the coordinator completed the old layout's step records.
  PIPECOORD_RETURN_IF_ERROR(executor_->ResumeAt(resume, nullptr, [](StepReport&&) { return Status::Ok(); }));
  // The stage's tensor-parallel group under the new layout's global ranks (bound to the new plane
  // below); the old one lives until the old backend, which holds it, is gone.
  const RankLayout new_layout = jobplan::LayoutOf(b.spec());
  std::unique_ptr<parallel::RingTensorParallel> tensor_parallel;
  if (new_layout.tp() > 1) {
    tensor_parallel = std::make_unique<parallel::RingTensorParallel>(
        nullptr, parallel::Group{new_layout.TensorGroup(GlobalRank(b)), new_layout.TensorRank(GlobalRank(b))},
        kTensorParallelTimeout);
  }
  auto made = MakeBackend(b, tensor_parallel.get());
  if (!made.ok()) return made.status();
  std::unique_ptr<ComputeBackend> backend = std::move(made).value();
  std::map<std::string, std::span<float>> old;
  for (const StateTensor& t : backend_->CheckpointState()) old[t.name] = t.data;
  for (const StateTensor& t : backend->CheckpointState()) {
    auto it = old.find(t.name);
    if (it == old.end() || it->second.size() != t.data.size()) {
      return Internal("reshaping in place: the new plan's " + t.name + " is not among this rank's tensors");
    }
    std::copy(it->second.begin(), it->second.end(), t.data.begin());
  }
  backend->set_optimizer_steps(backend_->optimizer_steps());
  executor_.reset();  // it holds the old backend and assignment
  boundary_.reset();
  checkpoints_.reset();  // waits for its writes
  backend_ = std::move(backend);
  tensor_parallel_ = std::move(tensor_parallel);
  assignment_ = &b;
  const int global = GlobalRank(b);
  auto checkpoints = PrepareCheckpoints(b, global, options_.checkpoint_dir, backend_.get(), /*load_state=*/false);
  if (!checkpoints.ok()) return checkpoints.status();
  checkpoints_ = std::move(checkpoints).value();
  if (checkpoints_ != nullptr && resume > 0) {
    // Under the new global rank: a restart of the new plan finds it (reported with the next step).
    PIPECOORD_RETURN_IF_ERROR(checkpoints_->Save({resume - 1, backend_->optimizer_steps()}, backend_->CheckpointState()));
  }
  auto connected = ConnectDataPlane(b, source, callbacks);
  if (!connected.ok()) return connected.status();
  TcpTransport* link = *connected;
  if (tensor_parallel_) tensor_parallel_->Bind(link);
  for (int joining : b.recovery().state_to()) {  // a new replica's rank of this stage (growing back)
    Status st = SendState(*link, joining, resume);
    if (!st.ok()) return Status(st.code(), "streaming the state to global rank " + std::to_string(joining) + ": " + st.message());
  }
  return RunNewExecutor(b, link, callbacks);
}

Status RankRun::Run(const TransportSource& source, const RankRunCallbacks& callbacks) {
  try {
    return RunOrThrow(source, callbacks);
  } catch (const std::bad_alloc&) {
    // What was allocated so far is freed as the stack unwinds; the worker stays up for its next
    // job (a job too big for it is kept off workers like it by its memory budget at dispatch).
    return ResourceExhausted("out of memory: the host could not allocate what " +
                             jobplan::LayoutOf(assignment_->spec()).Name(GlobalRank(*assignment_)) +
                             " needs (std::bad_alloc)");
  }
}

Status RankRun::RunOrThrow(const TransportSource& source, const RankRunCallbacks& callbacks) {
  const v1::Assignment& a = *assignment_;
  const int global = GlobalRank(a);
  const RankLayout layout = jobplan::LayoutOf(a.spec());
  if (layout.tp() > 1) {
    // The stage's tensor-parallel group; its transport is bound once the rank has one.
    tensor_parallel_ = std::make_unique<parallel::RingTensorParallel>(
        nullptr, parallel::Group{layout.TensorGroup(global), layout.TensorRank(global)}, kTensorParallelTimeout);
  }
  auto backend = MakeBackend(a, tensor_parallel_.get());
  if (!backend.ok()) return backend.status();
  backend_ = std::move(backend).value();
  // A restart resumes from this rank's checkpoint in the (shared) checkpoint dir.
  // A spare (a.recovery) gets its state from its replica once connected, not from a checkpoint.
  const auto load_start = std::chrono::steady_clock::now();
  auto checkpoints = PrepareCheckpoints(a, global, options_.checkpoint_dir, backend_.get(), !a.has_recovery());
  if (!checkpoints.ok()) return checkpoints.status();
  if (a.start_step() > 0 && !a.has_recovery()) {
    uint64_t bytes = 0;
    for (const StateTensor& t : backend_->CheckpointState()) bytes += t.data.size_bytes();
    std::fprintf(stderr, "worker: rank %d: loaded the checkpoint of step %d: %llu bytes of state in %.3f s\n", global,
                 a.start_step() - 1, static_cast<unsigned long long>(bytes),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  }
  checkpoints_ = std::move(checkpoints).value();
  auto connected = ConnectDataPlane(a, source, callbacks);
  if (!connected.ok()) return connected.status();
  TcpTransport* link = *connected;
  if (tensor_parallel_) tensor_parallel_->Bind(link);
  if (a.has_recovery() && a.recovery().state_from() >= 0) {
    const auto receive_start = std::chrono::steady_clock::now();
    Status st = ReceiveState(*link, a.recovery().state_from(), a.recovery().resume_step());
    if (!st.ok()) return Status(st.code(), "taking over in place: " + st.message());
    std::fprintf(stderr, "worker: rank %d: took over in place at step %d: %llu bytes of state from global rank %d in %.3f s\n",
                 global, a.recovery().resume_step(), static_cast<unsigned long long>(state_bytes_),
                 a.recovery().state_from(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - receive_start).count());
  }
  BoundaryTransportContext context;
  context.rank = global;
  context.world = layout.world();
  context.peers = TensorPeers(a);
  context.session = DataSession(a);
  context.rendezvous = options_.rendezvous;
  context.timeout = options_.connect_timeout;
  std::string how;
  auto boundary = backend_->BoundaryTransport(*link, context, &how);
  if (!how.empty()) std::fprintf(stderr, "worker: rank %d: %s\n", global, how.c_str());
  if (!boundary.ok()) {
    return Status(boundary.status().code(), "choosing the transport of boundary tensors: " + boundary.status().message());
  }
  boundary_ = std::move(boundary).value();
  if (boundary_ != nullptr && callbacks.on_transport && !callbacks.on_transport(boundary_.get())) {
    return FailedPrecondition("stopped before it ran");
  }
  // A device backend's tensor-parallel collectives move device tensors: on its transport (NCCL,
  // or host-staged), as its boundary tensors do.
  if (tensor_parallel_ && boundary_ != nullptr) tensor_parallel_->Bind(boundary_.get());
  return RunNewExecutor(a, boundary_ ? static_cast<Transport*>(boundary_.get()) : link, callbacks,
                        boundary_ ? link : nullptr);
}

Result<TcpTransport*> RankRun::ConnectDataPlane(const v1::Assignment& a, const TransportSource& source,
                                                const RankRunCallbacks& callbacks) {
  const int global = GlobalRank(a);
  auto transport = source(a);
  if (!transport.ok()) return transport.status();
  TcpTransport* link = *transport;
  if (callbacks.on_transport && !callbacks.on_transport(link)) return FailedPrecondition("stopped before it ran");
  // Links to the ranks it exchanges data with only (a recovery's peer list names every rank).
  const std::vector<int> needed = jobplan::LayoutOf(a.spec()).DataPlanePeers(global);
  std::map<int, std::string> peers;
  for (const v1::Peer& p : a.peers()) {
    if (std::binary_search(needed.begin(), needed.end(), p.global_rank())) peers[p.global_rank()] = p.data_endpoint();
  }
  PIPECOORD_RETURN_IF_ERROR(link->Connect(global, peers, DataSession(a), options_.connect_timeout));
  return link;
}

Status RankRun::RunNewExecutor(const v1::Assignment& a, Transport* transport, const RankRunCallbacks& callbacks,
                               Transport* host_transport) {
  ExecutorOptions eopt;
  eopt.host_transport = host_transport;
  eopt.clock_ns = options_.clock_ns;
  eopt.hooks = options_.hooks;
  eopt.checkpoints = checkpoints_.get();
  eopt.tensor_parallel = tensor_parallel_.get();
  eopt.commit = jobplan::RunsStepCommit(a.spec());
  executor_ = std::make_unique<Executor>(a, backend_.get(), transport, std::move(eopt));
  if (callbacks.on_start && !callbacks.on_start(executor_.get(), checkpoints_.get())) return FailedPrecondition("stopped before it ran");
  return executor_->Run(callbacks.on_step);
}

}  // namespace pipecoord::worker
