// The restart policy on a worker: resume a rank from its checkpoint, save one at step ends.
#ifndef PIPECOORD_WORKER_DAEMON_CHECKPOINTING_H_
#define PIPECOORD_WORKER_DAEMON_CHECKPOINTING_H_

#include <memory>
#include <string>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/checkpoint/async_writer.h"
#include "worker/daemon/compute_backend.h"

namespace pipecoord::worker {

// Checkpoints a rank keeps. The coordinator restarts every rank from the newest step it knows
// all ranks have on disk, and its knowledge lags: a rank may be one step ahead of another
// (pipeline ranks are at most one step apart), the other's newest write may still be running
// (reported one step later) and its last report may be in flight. So the restart step can be
// three checkpoints behind a rank's newest file, and all four must still be there.
inline constexpr int kCheckpointsKept = 4;

// When assignment.start_step > 0, loads global rank `global`'s checkpoint of step start_step - 1
// from `dir` into `backend`. Returns the writer for the executor (ExecutorOptions::checkpoints),
// null when the job saves none. FAILED_PRECONDITION when the job needs `dir` and it is empty;
// the checkpoint's own errors name its path.
Result<std::unique_ptr<AsyncCheckpointWriter>> PrepareCheckpoints(const v1::Assignment& assignment, int global,
                                                                  const std::string& dir, ComputeBackend* backend);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_CHECKPOINTING_H_
