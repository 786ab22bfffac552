#include "worker/daemon/checkpointing.h"

#include "common/rank_layout.h"
#include "jobplan/layout.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/daemon/init_weights.h"

namespace pipecoord::worker {

Result<std::unique_ptr<AsyncCheckpointWriter>> PrepareCheckpoints(const v1::Assignment& a, int global,
                                                                  const std::string& dir, ComputeBackend* backend,
                                                                  bool load_state) {
  const bool saves = a.spec().checkpoint_every() > 0;
  if ((saves || (load_state && a.start_step() > 0)) && dir.empty()) {
    return FailedPrecondition("spec.checkpointEvery: the job saves checkpoints but this worker has no --checkpoint-dir");
  }
  if (!load_state) {
    // nothing to load here
  } else if (a.start_step() > 0 && a.checkpoint_dp() > 0 && a.checkpoint_dp() != std::max(1, a.spec().dp())) {
    // Written by another number of replicas: this rank's coordinates in each of them, resharded.
    const RankLayout now = jobplan::LayoutOf(a.spec());
    const RankLayout then = RankLayout::OfDegrees(now.pp(), a.checkpoint_dp(), now.tp());
    std::vector<CheckpointFile> files;
    for (int d = 0; d < then.dp(); ++d) {
      const int old = then.Global({now.PipelineRank(global), d, now.TensorRank(global)});
      auto file = CheckpointFile::Read(CheckpointPath(dir, a.job_id(), old, a.start_step() - 1));
      if (!file.ok()) return Status(file.status().code(), "resuming at step " + std::to_string(a.start_step()) + ": " + file.status().message());
      files.push_back(std::move(file).value());
    }
    auto info = ReshardInto(files, backend->CheckpointState());
    if (!info.ok()) return Status(info.status().code(), "resuming at step " + std::to_string(a.start_step()) + ": " + info.status().message());
    if (info->step != a.start_step() - 1) {
      return InvalidArgument("resuming at step " + std::to_string(a.start_step()) + ": " + files[0].path() + " holds step " +
                             std::to_string(info->step));
    }
    backend->set_optimizer_steps(info->optimizer_steps);
  } else if (a.start_step() > 0) {
    auto info = ReadCheckpointFile(dir, a.job_id(), global, a.start_step() - 1, backend->CheckpointState());
    if (!info.ok()) {
      return Status(info.status().code(), "resuming at step " + std::to_string(a.start_step()) + ": " + info.status().message());
    }
    backend->set_optimizer_steps(info->optimizer_steps);
  } else if (!a.spec().init().empty()) {
    PIPECOORD_RETURN_IF_ERROR(LoadInitialWeights(a, backend));  // the first attempt starts from spec.init
  }
  if (!saves) return std::unique_ptr<AsyncCheckpointWriter>();
  auto writer = std::make_unique<AsyncCheckpointWriter>(dir, a.job_id(), global, kCheckpointsKept);
  writer->KeepFrom(a.start_step() - 1);  // the restart point this attempt started from
  return writer;
}

}  // namespace pipecoord::worker
