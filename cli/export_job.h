// pipectl export's work, apart from talking to the coordinator: a job's rank checkpoints of one
// step (data/rank_checkpoint.h) become one Hugging Face Llama folder (config.json and
// model.safetensors, or shards + model.safetensors.index.json), which transformers'
// LlamaForCausalLM.from_pretrained loads.
#ifndef PIPECOORD_CLI_EXPORT_JOB_H_
#define PIPECOORD_CLI_EXPORT_JOB_H_

#include <cstdint>
#include <string>

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::cli {

struct ExportOptions {
  std::string checkpoint_dir;  // the workers' --checkpoint-dir, as this machine sees it
  std::string job_id;
  int64_t step = 0;             // the checkpointed step to export
  std::string out_dir;
  uint64_t max_shard_bytes = 0;  // 0: one model.safetensors
};

struct ExportSummary {
  int tensors = 0;
  uint64_t bytes = 0;  // the weights' F32 bytes
};

// `spec` is the job's spec as the coordinator stores it (defaults applied). Reads the files of
// data-parallel replica 0 (every replica holds the same weights), and where one holds shards of
// its weights ("NAME/value@B": ZeRO with sharded masters, the CUDA backend's bf16) the other
// replicas' files of its rank too, joining the pieces; checks each
// (format, hash, step), puts each tensor's tensor-parallel slices back together as the model split
// them (worker/model/weight_init.h) and checks that together they hold every weight of the model
// exactly once.
// Errors name the file and the tensor.
Result<ExportSummary> ExportJob(const v1::JobSpec& spec, const ExportOptions& options);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_EXPORT_JOB_H_
