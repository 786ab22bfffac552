// RunRankThreads: a job's ranks in one process, for the worker/cuda tests: one thread per global
// rank of the plan, each with a CudaDevice of its own (its own pool, so each pool's peak is that
// rank's), the backend RankSetup::backend builds on it (default: MakeCudaBackend), the worker's
// Executor over PoolTransport (pool_transport_for_tests.h), and the RunHooks RankSetup::hooks
// gives, if any. Under spec.tp > 1 each rank also gets its tensor-parallel group (RankLayout's,
// a RingTensorParallel over its PoolTransport), handed to the backend and the executor as
// RankRun does. A rank that fails shuts the mailbox down, so the others fail at once rather than
// wait out their timeouts. On the host double the devices are host memory (cuda_test_util.h).
#ifndef PIPECOORD_WORKER_CUDA_RANK_THREADS_FOR_TESTS_H_
#define PIPECOORD_WORKER_CUDA_RANK_THREADS_FOR_TESTS_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/rank_layout.h"
#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/pool_transport_for_tests.h"
#include "worker/daemon/executor.h"
#include "worker/daemon/run_hooks.h"
#include "worker/parallel/tensor_parallel.h"

namespace pipecoord::worker::cuda {

struct RankOutcome {
  Status status;                    // the first error of the rank (building, running or `after`)
  std::vector<StepReport> reports;  // one per step run
};

struct RankSetup {
  // Rank g's backend on its device (and its tensor-parallel group, null for tp 1); null:
  // MakeCudaBackend with that device and group.
  std::function<Result<std::unique_ptr<ComputeBackend>>(const v1::Assignment&, std::shared_ptr<CudaDevice>,
                                                        parallel::TensorParallel*)>
      backend;
  // Rank g's hooks (they must outlive the run: the runner keeps them); null: none.
  std::function<std::unique_ptr<RunHooks>(const v1::Assignment&)> hooks;
  // Called with the rank's backend once built (before the run) and once its run returned OK.
  std::function<void(int global, ComputeBackend&)> built, after;
  SentTensors sent = SentTensors::kReleased;
  int start_step = 0;  // the assignment's (a restart's first step; `built` loads its state)
};

inline std::vector<RankOutcome> RunRankThreads(const v1::JobSpec& spec, const v1::Plan& plan,
                                               const RankSetup& setup = {}) {
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int world = layout.world();
  Mailbox mailbox;
  std::vector<RankOutcome> out(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int g = 0; g < world; ++g) {
    threads.emplace_back([&, g] {
      RankOutcome& o = out[static_cast<size_t>(g)];
      auto fail = [&](Status st) {
        o.status = std::move(st);
        mailbox.Shutdown();
      };
      v1::Assignment a = jobplan::BuildAssignment(spec.name(), spec, plan, g, {}, 1);
      a.set_start_step(setup.start_step);
      auto device = CudaDevice::Open(0);
      if (!device.ok()) return fail(device.status());
      std::shared_ptr<CudaDevice> shared = std::move(device).value();
      PoolTransport transport(g, shared.get(), &mailbox, setup.sent);
      std::unique_ptr<parallel::RingTensorParallel> group;
      if (layout.tp() > 1) {
        group = std::make_unique<parallel::RingTensorParallel>(
            &transport, parallel::Group{layout.TensorGroup(g), layout.TensorRank(g)}, std::chrono::milliseconds(120000));
      }
      std::unique_ptr<ComputeBackend> backend;
      if (setup.backend) {
        auto made = setup.backend(a, shared, group.get());
        if (!made.ok()) return fail(made.status());
        backend = std::move(made).value();
      } else {
        CudaBackendOptions options;
        options.shared_device = shared;
        options.tensor_parallel = group.get();
        auto made = MakeCudaBackend(a, options);
        if (!made.ok()) return fail(made.status());
        backend = std::move(made).value();
      }
      if (setup.built) setup.built(g, *backend);
      std::unique_ptr<RunHooks> hooks = setup.hooks ? setup.hooks(a) : nullptr;
      ExecutorOptions eo;
      eo.hooks = hooks.get();
      eo.tensor_parallel = group.get();
      eo.recv_timeout = std::chrono::milliseconds(120000);
      Executor executor(a, backend.get(), &transport, eo);
      Status st = executor.Run([&](StepReport&& report) {
        o.reports.push_back(std::move(report));
        return Status::Ok();
      });
      if (!st.ok()) return fail(st);
      if (setup.after) setup.after(g, *backend);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_RANK_THREADS_FOR_TESTS_H_
