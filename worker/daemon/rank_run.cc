#include "worker/daemon/rank_run.h"

#include <cstdio>
#include <map>
#include <string>

#include "worker/daemon/backend_factory.h"
#include "worker/daemon/checkpointing.h"

namespace pipecoord::worker {

RankRun::RankRun(const v1::Assignment& assignment, RankRunOptions options)
    : assignment_(assignment), options_(std::move(options)) {}

RankRun::~RankRun() = default;

int RankRun::GlobalRank(const v1::Assignment& a) { return a.dp_rank() * a.spec().pp() + a.rank(); }

Status RankRun::Run(const TransportSource& source, const RankRunCallbacks& callbacks) {
  const v1::Assignment& a = assignment_;
  const int global = GlobalRank(a);
  auto backend = MakeBackend(a);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(backend).value();
  // A restart resumes from this rank's checkpoint in the (shared) checkpoint dir.
  auto checkpoints = PrepareCheckpoints(a, global, options_.checkpoint_dir, backend_.get());
  if (!checkpoints.ok()) return checkpoints.status();
  checkpoints_ = std::move(checkpoints).value();
  auto transport = source(a);
  if (!transport.ok()) return transport.status();
  TcpTransport* link = *transport;
  const Status stopped = FailedPrecondition("stopped before it ran");
  if (callbacks.on_transport && !callbacks.on_transport(link)) return stopped;
  std::map<int, std::string> peers;
  for (const v1::Peer& p : a.peers()) {
    if (p.global_rank() != global) peers[p.global_rank()] = p.data_endpoint();
  }
  PIPECOORD_RETURN_IF_ERROR(link->Connect(global, peers, a.session(), options_.connect_timeout));
  std::string how;
  boundary_ = backend_->BoundaryTransport(*link, &how);
  if (!how.empty()) std::fprintf(stderr, "worker: rank %d: %s\n", global, how.c_str());
  ExecutorOptions eopt;
  eopt.clock_ns = options_.clock_ns;
  eopt.hooks = options_.hooks;
  eopt.checkpoints = checkpoints_.get();
  executor_ = std::make_unique<Executor>(a, backend_.get(), boundary_ ? boundary_.get() : link, std::move(eopt));
  if (callbacks.on_start && !callbacks.on_start(executor_.get(), checkpoints_.get())) return stopped;
  return executor_->Run(callbacks.on_step);
}

}  // namespace pipecoord::worker
