#include "worker/daemon/rank_run.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <new>
#include <set>
#include <string>

#include "jobplan/layout.h"
#include "worker/daemon/backend_factory.h"
#include "worker/daemon/checkpointing.h"

namespace pipecoord::worker {
namespace {

// A tensor-parallel collective waits for the group's slowest rank to reach it: as long as a
// pipeline receive may wait (ExecutorOptions::recv_timeout's default).
constexpr std::chrono::milliseconds kTensorParallelTimeout{60000};

}  // namespace

RankRun::RankRun(const v1::Assignment& assignment, RankRunOptions options)
    : assignment_(assignment), options_(std::move(options)) {}

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
  return {peers.begin(), peers.end()};
}

Status RankRun::Run(const TransportSource& source, const RankRunCallbacks& callbacks) {
  try {
    return RunOrThrow(source, callbacks);
  } catch (const std::bad_alloc&) {
    // What was allocated so far is freed as the stack unwinds; the worker stays up for its next
    // job (a job too big for it is kept off workers like it by its memory budget at dispatch).
    return ResourceExhausted("out of memory: the host could not allocate what " +
                             jobplan::LayoutOf(assignment_.spec()).Name(GlobalRank(assignment_)) +
                             " needs (std::bad_alloc)");
  }
}

Status RankRun::RunOrThrow(const TransportSource& source, const RankRunCallbacks& callbacks) {
  const v1::Assignment& a = assignment_;
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
  auto checkpoints = PrepareCheckpoints(a, global, options_.checkpoint_dir, backend_.get());
  if (!checkpoints.ok()) return checkpoints.status();
  checkpoints_ = std::move(checkpoints).value();
  auto transport = source(a);
  if (!transport.ok()) return transport.status();
  TcpTransport* link = *transport;
  if (tensor_parallel_) tensor_parallel_->Bind(link);
  const Status stopped = FailedPrecondition("stopped before it ran");
  if (callbacks.on_transport && !callbacks.on_transport(link)) return stopped;
  std::map<int, std::string> peers;
  for (const v1::Peer& p : a.peers()) {
    if (p.global_rank() != global) peers[p.global_rank()] = p.data_endpoint();
  }
  PIPECOORD_RETURN_IF_ERROR(link->Connect(global, peers, a.session(), options_.connect_timeout));
  BoundaryTransportContext context;
  context.rank = global;
  context.world = layout.world();
  context.peers = TensorPeers(a);
  context.session = a.session();
  context.rendezvous = options_.rendezvous;
  context.timeout = options_.connect_timeout;
  std::string how;
  auto boundary = backend_->BoundaryTransport(*link, context, &how);
  if (!how.empty()) std::fprintf(stderr, "worker: rank %d: %s\n", global, how.c_str());
  if (!boundary.ok()) {
    return Status(boundary.status().code(), "choosing the transport of boundary tensors: " + boundary.status().message());
  }
  boundary_ = std::move(boundary).value();
  if (boundary_ != nullptr && callbacks.on_transport && !callbacks.on_transport(boundary_.get())) return stopped;
  ExecutorOptions eopt;
  eopt.clock_ns = options_.clock_ns;
  eopt.hooks = options_.hooks;
  eopt.checkpoints = checkpoints_.get();
  eopt.tensor_parallel = tensor_parallel_.get();
  executor_ = std::make_unique<Executor>(a, backend_.get(), boundary_ ? boundary_.get() : link, std::move(eopt));
  if (callbacks.on_start && !callbacks.on_start(executor_.get(), checkpoints_.get())) return stopped;
  return executor_->Run(callbacks.on_step);
}

}  // namespace pipecoord::worker
