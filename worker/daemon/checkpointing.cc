#include "worker/daemon/checkpointing.h"

#include "common/rank_layout.h"
#include "jobplan/layout.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/daemon/init_weights.h"

namespace pipecoord::worker {
namespace {

// The checkpoint of step start_step - 1 into `tensors`: this rank's own file, or, when another
// number of replicas wrote it (checkpoint_dp), its coordinates' files in each of them, resharded.
Result<CheckpointInfo> ReadRestartPoint(const v1::Assignment& a, int global, const std::string& dir,
                                        const std::vector<StateTensor>& tensors) {
  const int step = a.start_step() - 1;
  if (a.checkpoint_dp() <= 0 || a.checkpoint_dp() == std::max(1, a.spec().dp())) {
    return ReadCheckpointFile(dir, a.job_id(), global, step, tensors);
  }
  const RankLayout now = jobplan::LayoutOf(a.spec());
  const RankLayout then = RankLayout::OfDegrees(now.pp(), a.checkpoint_dp(), now.tp());
  std::vector<CheckpointFile> files;
  for (int d = 0; d < then.dp(); ++d) {
    auto file = CheckpointFile::Read(
        CheckpointPath(dir, a.job_id(), then.Global({now.PipelineRank(global), d, now.TensorRank(global)}), step));
    if (!file.ok()) return file.status();
    files.push_back(std::move(file).value());
  }
  auto info = ReshardInto(files, tensors);
  if (info.ok() && info->step != step) {
    return InvalidArgument(files[0].path() + " holds step " + std::to_string(info->step) + ", expected " + std::to_string(step));
  }
  return info;
}

}  // namespace

Result<std::unique_ptr<AsyncCheckpointWriter>> PrepareCheckpoints(const v1::Assignment& a, int global,
                                                                  const std::string& dir, ComputeBackend* backend,
                                                                  bool load_state) {
  const bool saves = a.spec().checkpoint_every() > 0;
  if ((saves || (load_state && a.start_step() > 0)) && dir.empty()) {
    return FailedPrecondition("spec.checkpointEvery: the job saves checkpoints but this worker has no --checkpoint-dir");
  }
  if (!load_state) {
    // nothing to load here
  } else if (a.start_step() > 0) {
    auto info = ReadRestartPoint(a, global, dir, backend->CheckpointState());
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
