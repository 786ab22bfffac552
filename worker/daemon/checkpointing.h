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

// Checkpoints a rank keeps beyond the restart point. The coordinator restarts every rank from the
// newest step it knows all ranks have on disk, and its knowledge lags by however long it was not
// told (ranks a step apart, writes reported a step later, reports in flight, or a coordinator
// that is down while the ranks run on): no fixed number of files covers that. So the writer keeps
// every file from the restart point the coordinator last confirmed (AsyncCheckpointWriter::
// KeepFrom: the assignment's start, then each heartbeat's answer), and of the older ones none.
inline constexpr int kCheckpointsKept = 1;

// When assignment.start_step > 0, loads global rank `global`'s checkpoint of step start_step - 1
// from `dir` into `backend`; otherwise, with spec.init, the initial weights from it
// (init_weights.h). Returns the writer for the executor (ExecutorOptions::checkpoints),
// keeping every file from the resumed one on (KeepFrom), null when the job saves none. FAILED_PRECONDITION when the job needs `dir` and it is empty;
// the checkpoint's own errors name its path.
// With !load_state (a spare taking over a lost rank in place gets its state from a replica) nothing
// is loaded; the writer is prepared as for a resume.
Result<std::unique_ptr<AsyncCheckpointWriter>> PrepareCheckpoints(const v1::Assignment& assignment, int global,
                                                                  const std::string& dir, ComputeBackend* backend,
                                                                  bool load_state = true);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_CHECKPOINTING_H_
