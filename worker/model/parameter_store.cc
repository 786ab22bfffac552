#include "worker/model/parameter_store.h"

#include <algorithm>
#include <utility>

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
  p->adam_m.assign(static_cast<size_t>(n), 0.0f);
  p->adam_v.assign(static_cast<size_t>(n), 0.0f);
  params_.push_back(std::move(p));
  return params_.back().get();
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
    refs.push_back(ParameterRef{p->name, p->shape, p->value, p->grad, p->adam_m, p->adam_v});
  }
  return refs;
}

int64_t ParameterStore::NumElements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->numel();
  return n;
}

void ParameterStore::ZeroGrad() {
  for (auto& p : params_) std::fill(p->grad.begin(), p->grad.end(), 0.0f);
}

}  // namespace pipecoord::model
