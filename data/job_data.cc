#include "data/job_data.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <utility>

namespace pipecoord::data {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Result<TokenDataset> OpenChecked(const std::string& prefix, const JobDataSpec& spec, const char* field) {
  TokenDatasetOptions options;
  options.vocab_size = spec.vocab_size;
  options.check_tokens = spec.check_tokens;
  auto ds = TokenDataset::Open(prefix, options);
  if (!ds.ok()) return ds.status();
  if (!spec.format.empty() && spec.format != ds->format_name()) {
    return InvalidArgument(std::string(field) + ": spec.data.format is \"" + spec.format + "\", but " + prefix +
                           " is " + ds->format_name() + " (" + ds->layout_path() + ")");
  }
  return ds;
}

// The sampler over `range`, its errors naming the file: "d/train.bin: sampling: ...".
Result<SequenceSampler> Sampler(TokenRange range, const SamplingSpec& spec, SequenceSampler::Order order,
                                const std::string& what) {
  auto s = SequenceSampler::Create(range, spec, order);
  if (!s.ok()) return InvalidArgument(what + ": " + s.status().message());
  return s;
}

}  // namespace

Result<JobData> JobData::Open(const JobDataSpec& spec) {
  PIPECOORD_RETURN_IF_ERROR(ValidateJobDataFields(spec));
  // A prepared folder: its train split, and its val split unless validation comes from elsewhere.
  std::string train_prefix = spec.path, val_prefix = spec.val_path;
  if (IsDirectory(spec.path)) {
    std::string dir = spec.path;
    if (dir.back() != '/') dir += '/';
    train_prefix = dir + "train";
    if (val_prefix.empty() && spec.val_fraction == 0 && Exists(dir + "val.bin")) val_prefix = dir + "val";
  }
  auto train = OpenChecked(train_prefix, spec, "spec.data.path");
  if (!train.ok()) return train.status();
  auto split = SplitTail(train->tokens().size(), spec.val_fraction);
  if (!split.ok()) return InvalidArgument("spec.data.valFraction: " + split.status().message());

  auto sampler = Sampler(split->train, spec.sampling, SequenceSampler::Order::kShuffled,
                         train->bin_path() + (spec.val_fraction > 0 ? " (training head, " +
                                                                          std::to_string(split->train.size()) + " tokens)"
                                                                    : ""));
  if (!sampler.ok()) return sampler.status();
  JobData data(std::move(train).value(), std::move(sampler).value());
  if (spec.eval_batches <= 0) return data;

  SamplingSpec val_spec = spec.sampling;
  val_spec.microbatches = spec.eval_batches;
  if (!val_prefix.empty()) {
    auto val = OpenChecked(val_prefix, spec, "spec.data.valPath");
    if (!val.ok()) return val.status();
    data.val_source_ = val->bin_path();
    auto vs = Sampler(TokenRange{0, val->tokens().size()}, val_spec, SequenceSampler::Order::kSequential,
                      data.val_source_ + " (validation, evalBatches " + std::to_string(spec.eval_batches) + ")");
    if (!vs.ok()) return vs.status();
    data.val_.emplace(std::move(val).value());
    data.val_sampler_.emplace(std::move(vs).value());
  } else if (spec.val_fraction > 0) {
    data.val_source_ = data.train_.bin_path() + " (validation tail, valFraction " + Num(spec.val_fraction) + ", " +
                       std::to_string(split->val.size()) + " tokens)";
    auto vs = Sampler(split->val, val_spec, SequenceSampler::Order::kSequential,
                      data.val_source_ + ", evalBatches " + std::to_string(spec.eval_batches));
    if (!vs.ok()) return vs.status();
    data.val_sampler_.emplace(std::move(vs).value());
  } else {
    return InvalidArgument("spec.evalEvery: validation needs a split: spec.data.valPath, spec.data.valFraction, or a "
                           "folder from pipectl data prepare holding val.bin (" + spec.path + " has none)");
  }
  return data;
}

Result<SequenceBatch> JobData::Train(int64_t step, int replica, int microbatch) const {
  auto batch = train_sampler_.Read(train_.tokens(), step, replica, microbatch);
  if (!batch.ok()) return Status(batch.status().code(), train_.bin_path() + ": " + batch.status().message());
  return batch;
}

Result<SequenceBatch> JobData::Validation(int replica, int batch) const {
  if (!val_sampler_) return FailedPrecondition("validation: the job's data has no validation split");
  auto read = val_sampler_->Read(validation().tokens(), 0, replica, batch);
  if (!read.ok()) return Status(read.status().code(), validation().bin_path() + ": " + read.status().message());
  return read;
}

}  // namespace pipecoord::data
