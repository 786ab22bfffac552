// sampler_dump: prints what the C++ data code (data/sequence_sampler.h, data/job_data.h) reads,
// as one line of JSON, for python/pipecoord/token_data.py to be checked against. Two modes:
//
//   sampler_dump range --begin B --end E --seed S --seq L --batch b --microbatches m --dp D
//                      [--order shuffled|sequential] --steps 0,5,...
//     SequenceSampler over tokens [B, E) (no file): {"windows": W, "per_step": G,
//     "steps_per_epoch": E, "starts": [[step, replica, mb, [offsets...]], ...]} for every listed
//     step, replica and micro-batch.
//
//   sampler_dump job --data PATH --vocab V --seed S --seq L --batch b --microbatches m --dp D
//                    [--val-fraction F] [--val-path PREFIX] [--eval-batches K] --train-steps N
//     JobData::Open as a worker opens a job's spec.data, then JobData::Train for steps 0..N-1:
//     {"windows": W, ..., "batches": [[step, replica, mb, [offsets], [inputs], [targets]], ...]};
//     with --eval-batches K > 0 (spec.evalEvery's evalBatches) also JobData::Validation of every
//     replica's K batches: "validation": [[replica, k, [inputs], [targets]], ...].
#include <cstdio>
#include <string>
#include <vector>

#include "common/flags.h"
#include "data/job_data.h"
#include "data/sequence_sampler.h"

namespace pipecoord {
namespace {

std::string List(const std::vector<uint64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string List(const std::vector<int32_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

std::string Header(const data::SequenceSampler& s) {
  return "{\"windows\": " + std::to_string(s.windows()) + ", \"per_step\": " + std::to_string(s.sequences_per_step()) +
         ", \"steps_per_epoch\": " + std::to_string(s.steps_per_epoch());
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "sampler_dump: %s\n", message.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  if (argc < 2 || (std::string(argv[1]) != "range" && std::string(argv[1]) != "job")) {
    std::fprintf(stderr, "usage: sampler_dump range|job [flags] (--help)\n");
    return 2;
  }
  const std::string mode = argv[1];
  std::string begin = "0", end = "0", seed = "0", order = "shuffled", path;
  int seq = 0, batch = 0, microbatches = 0, dp = 1, vocab = 0, steps = 0, eval_batches = 0;
  std::string val_path;
  double val_fraction = 0;
  std::vector<int> step_list;
  FlagSet flags("sampler_dump " + mode + " [flags]", "Prints the C++ sampler's windows (and a job's tokens) as JSON.");
  flags.String("begin", &begin, "range: the first token (default 0)");
  flags.String("end", &end, "range: one past the last token");
  flags.String("seed", &seed, "the sampling seed, a uint64 (default 0)");
  flags.Choice("order", &order, {"shuffled", "sequential"}, "range: the order (default shuffled)");
  flags.IntList("steps", &step_list, "range: the steps to print");
  flags.Int("seq", &seq, "tokens per sequence");
  flags.Int("batch", &batch, "sequences per micro-batch");
  flags.Int("microbatches", &microbatches, "micro-batches per replica per step");
  flags.Int("dp", &dp, "replicas (default 1)");
  flags.String("data", &path, "job: spec.data.path");
  flags.Int("vocab", &vocab, "job: the model's vocabulary");
  flags.Double("val-fraction", &val_fraction, "job: spec.data.valFraction (default 0)");
  flags.Int("train-steps", &steps, "job: print steps 0..N-1");
  flags.String("val-path", &val_path, "job: spec.data.valPath (default none)");
  flags.Int("eval-batches", &eval_batches, "job: validation batches per replica to print (default 0: none)");
  if (Status st = flags.Parse(argc - 2, argv + 2); !st.ok()) return Fail(st.message());
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  data::SamplingSpec spec;
  spec.seed = std::stoull(seed);
  spec.seq_len = seq;
  spec.micro_batch_size = batch;
  spec.microbatches = microbatches;
  spec.dp = dp;

  if (mode == "range") {
    auto order_value = order == "shuffled" ? data::SequenceSampler::Order::kShuffled
                                           : data::SequenceSampler::Order::kSequential;
    auto sampler = data::SequenceSampler::Create({std::stoull(begin), std::stoull(end)}, spec, order_value);
    if (!sampler.ok()) return Fail(sampler.status().message());
    std::string out = Header(*sampler) + ", \"starts\": [";
    bool first = true;
    for (int step : step_list) {
      for (int r = 0; r < dp; ++r) {
        for (int mb = 0; mb < microbatches; ++mb) {
          auto starts = sampler->MicroBatchStarts(step, r, mb);
          if (!starts.ok()) return Fail(starts.status().message());
          out += std::string(first ? "" : ", ") + "[" + std::to_string(step) + ", " + std::to_string(r) + ", " +
                 std::to_string(mb) + ", " + List(*starts) + "]";
          first = false;
        }
      }
    }
    std::printf("%s]}\n", out.c_str());
    return 0;
  }

  data::JobDataSpec job;
  job.path = path;
  job.vocab_size = vocab;
  job.val_fraction = val_fraction;
  job.val_path = val_path;
  job.eval_batches = eval_batches;
  job.sampling = spec;
  auto opened = data::JobData::Open(job);
  if (!opened.ok()) return Fail(opened.status().message());
  std::string out = Header(opened->train_sampler()) + ", \"batches\": [";
  bool first = true;
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < dp; ++r) {
      for (int mb = 0; mb < microbatches; ++mb) {
        auto starts = opened->train_sampler().MicroBatchStarts(step, r, mb);
        auto b = opened->Train(step, r, mb);
        if (!starts.ok()) return Fail(starts.status().message());
        if (!b.ok()) return Fail(b.status().message());
        out += std::string(first ? "" : ", ") + "[" + std::to_string(step) + ", " + std::to_string(r) + ", " +
               std::to_string(mb) + ", " + List(*starts) + ", " + List(b->inputs) + ", " + List(b->targets) + "]";
        first = false;
      }
    }
  }
  out += "]";
  if (eval_batches > 0) {
    out += ", \"validation\": [";
    first = true;
    for (int r = 0; r < dp; ++r) {
      for (int k = 0; k < eval_batches; ++k) {
        auto b = opened->Validation(r, k);
        if (!b.ok()) return Fail(b.status().message());
        out += std::string(first ? "" : ", ") + "[" + std::to_string(r) + ", " + std::to_string(k) + ", " +
               List(b->inputs) + ", " + List(b->targets) + "]";
        first = false;
      }
    }
    out += "]";
  }
  std::printf("%s}\n", out.c_str());
  return 0;
}

}  // namespace
}  // namespace pipecoord

int main(int argc, char** argv) { return pipecoord::Main(argc, argv); }
