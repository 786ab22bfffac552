#include "worker/model/parameter_store.h"

#include <algorithm>
#include <string>
#include <utility>

#include "worker/parallel/collectives.h"

namespace pipecoord::model {

Parameter* ParameterStore::Add(std::string name, std::vector<int64_t> shape, bool weight_decay) {
  auto p = std::make_unique<Parameter>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  p->name = std::move(name);
  p->shape = std::move(shape);
  p->weight_decay = weight_decay;
  p->value.assign(static_cast<size_t>(n), 0.0f);
  p->grad.assign(static_cast<size_t>(n), 0.0f);
  params_.push_back(std::move(p));
  return params_.back().get();
}

void ParameterStore::ShardMoments(int shards, int index) {
  const int64_t n = NumElements();
  const size_t len = static_cast<size_t>(n);
  shards_ = shards;
  shard_begin_ = static_cast<int64_t>(worker::parallel::ChunkBegin(len, shards, index));
  shard_end_ = static_cast<int64_t>(worker::parallel::ChunkBegin(len, shards, index + 1));
  const size_t padded = (len + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
  // Fresh buffers: the old ones are freed, not kept at their capacity.
  kernels::HostBuffer<float>(padded, 0.0f).swap(adam_m_);
  kernels::HostBuffer<float>(padded, 0.0f).swap(adam_v_);
  int64_t offset = 0;  // of the parameter in the flat index space
  for (auto& p : params_) {
    const int64_t lo = std::max(offset, shard_begin_), hi = std::min(offset + p->numel(), shard_end_);
    p->moment_begin = lo < hi ? lo - offset : 0;
    const size_t count = lo < hi ? static_cast<size_t>(hi - lo) : 0;
    const size_t at = lo < hi ? static_cast<size_t>(lo - shard_begin_) : 0;
    p->adam_m = std::span<float>(adam_m_.data() + at, count);
    p->adam_v = std::span<float>(adam_v_.data() + at, count);
    p->offset = offset;
    offset += p->numel();
  }
}

Parameter* ParameterStore::Find(std::string_view name) {
  for (auto& p : params_) {
    if (p->name == name) return p.get();
  }
  return nullptr;
}

const Parameter* ParameterStore::Find(std::string_view name) const {
  return const_cast<ParameterStore*>(this)->Find(name);
}

std::vector<ParameterRef> ParameterStore::Refs() {
  std::vector<ParameterRef> refs;
  refs.reserve(params_.size());
  for (auto& p : params_) {
    refs.push_back(
        ParameterRef{p->name, p->shape, p->value, p->grad, p->moment_begin, p->adam_m, p->adam_v, p->weight_decay});
  }
  return refs;
}

int64_t ParameterStore::NumElements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->numel();
  return n;
}

void ParameterStore::ZeroGrad() {
  if (released_) {
    std::fill(shard_grad_.begin(), shard_grad_.end(), 0.0f);
    return;
  }
  for (auto& p : params_) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
}

void ParameterStore::KeepShardGradients() { shard_gradients_ = true; }

void ParameterStore::ReleaseGradients() {
  if (released_ || !shard_gradients_) return;
  shard_grad_.assign(adam_m_.size(), 0.0f);
  for (auto& p : params_) {
    if (!p->adam_m.empty()) {
      float* dst = shard_grad_.data() + (p->offset + p->moment_begin - shard_begin_);
      std::copy_n(p->grad.data() + p->moment_begin, p->adam_m.size(), dst);
    }
    kernels::HostBuffer<float>().swap(p->grad);
  }
  released_ = true;
}

bool ParameterStore::RestoreGradients() {
  if (!released_) return false;
  kernels::HostBuffer<float>().swap(shard_grad_);  // the whole gradients hold the shard's from here
  for (auto& p : params_) p->grad.assign(static_cast<size_t>(p->numel()), 0.0f);
  released_ = false;
  return true;
}

std::span<float> ParameterStore::OptimizerGrad(const Parameter& p) const {
  if (p.adam_m.empty()) return {};
  if (released_) {
    return std::span<float>(const_cast<float*>(shard_grad_.data()) + (p.offset + p.moment_begin - shard_begin_),
                            p.adam_m.size());
  }
  return std::span<float>(const_cast<float*>(p.grad.data()) + p.moment_begin, p.adam_m.size());
}

Status CheckOptimizerShard(int shards, int index, int64_t optimizer_steps) {
  if (shards < 1 || index < 0 || index >= shards) {
    return InvalidArgument("optimizer shard " + std::to_string(index) + " of " + std::to_string(shards) +
                           ": needs shards >= 1 and 0 <= index < shards");
  }
  if (optimizer_steps != 0) {
    return FailedPrecondition("optimizer shard: the moments are sharded before the first step (" +
                              std::to_string(optimizer_steps) + " taken)");
  }
  return Status::Ok();
}

}  // namespace pipecoord::model
