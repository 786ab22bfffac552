// pipectl export JOB --out DIR --checkpoint-dir DIR: the job's latest checkpoint as a Hugging
// Face Llama folder (cli/export_job.h).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/export_job.h"
#include "cli/job_client.h"
#include "cli/verbs.h"
#include "common/flags.h"

namespace pipecoord::cli {

int RunExport(int argc, char** argv) {
  Connection conn;
  ExportOptions o;
  int step = -1;
  double max_shard = 0;
  FlagSet flags("pipectl export JOB --out DIR --checkpoint-dir DIR [--step N] [--max-shard-bytes N] "
                "[--coordinator HOST:PORT] [--tls-ca FILE] [--token TOKEN]",
                "Writes a job's trained model as a Hugging Face Llama folder: config.json and model.safetensors "
                "(or shards and model.safetensors.index.json), F32, loadable by transformers' LlamaForCausalLM. "
                "The weights come from the job's checkpoints (spec.checkpointEvery > 0): the coordinator says "
                "which step every rank has saved; the files are read from --checkpoint-dir, the workers' folder "
                "as this machine sees it (shared, or copied here). docs/weights.md.");
  AddConnectionFlags(flags, &conn);
  flags.String("out", &o.out_dir, "the folder to write (created if needed)");
  flags.String("checkpoint-dir", &o.checkpoint_dir, "the workers' --checkpoint-dir, as seen from here");
  flags.Int("step", &step, "the checkpointed step to export (default: the newest every rank saved)");
  flags.Double("max-shard-bytes", &max_shard, "split the weights into shards of at most this many bytes (0: one file)");
  std::vector<std::string> positional;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "export", &positional); rc >= 0) return rc;
  if (positional.size() != 1) return Fail("export", InvalidArgument("JOB: exactly one job id required (see `pipectl jobs`)"));
  if (o.out_dir.empty()) return Fail("export", InvalidArgument("--out: required (the folder to write)"));
  if (o.checkpoint_dir.empty()) {
    return Fail("export", InvalidArgument("--checkpoint-dir: required (the workers' --checkpoint-dir, as seen from here)"));
  }
  if (!(max_shard >= 0) || max_shard > 1e18 || max_shard != static_cast<double>(static_cast<uint64_t>(max_shard))) {
    return Fail("export", InvalidArgument("--max-shard-bytes: must be a whole number >= 0, got " + std::to_string(max_shard)));
  }
  auto stub = JobStub(&conn);
  if (!stub.ok()) return Fail("export", stub.status());
  auto ctx = Deadline(10);
  v1::GetJobRequest req;
  req.set_job_id(positional[0]);
  v1::Job job;
  Status st = FromGrpc((*stub)->GetJob(ctx.get(), req, &job), conn);
  if (!st.ok()) return Fail("export", st);
  if (job.checkpointed_steps() == 0) {
    return Fail("export", FailedPrecondition(job.id() + " has no step checkpointed on every rank (spec.checkpointEvery " +
                                             std::to_string(job.spec().checkpoint_every()) + ", " +
                                             std::to_string(job.steps_done()) + " step(s) done)"));
  }
  if (step < 0) step = job.checkpointed_steps() - 1;
  if (step >= job.checkpointed_steps()) {
    return Fail("export", InvalidArgument("--step: must be below " + std::to_string(job.checkpointed_steps()) +
                                          " (steps checkpointed on every rank), got " + std::to_string(step)));
  }
  o.job_id = job.id();
  o.step = step;
  o.max_shard_bytes = static_cast<uint64_t>(max_shard);
  auto done = ExportJob(job.spec(), o);
  if (!done.ok()) return Fail("export", done.status());
  std::printf("%s: step %d exported to %s (%d tensors, %.1f MiB F32)%s\n", job.id().c_str(), step, o.out_dir.c_str(),
              done->tensors, static_cast<double>(done->bytes) / (1 << 20),
              step + 1 < job.spec().steps() ? " (not the job's last step: it saves every spec.checkpointEvery steps)" : "");
  return kExitOk;
}

}  // namespace pipecoord::cli
