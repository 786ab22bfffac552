// ParameterStore: a stage's trainable tensors by name, each with its gradient and AdamW
// moments. Float storage; buffers never move once added (they are safe to point into).
#ifndef PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_
#define PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pipecoord::model {

struct Parameter {
  std::string name;            // e.g. "layers.3.attention.wq" (Llama's names)
  std::vector<int64_t> shape;  // row-major
  bool weight_decay = true;    // AdamW decays matrices, not norm gains
  std::vector<float> value, grad, adam_m, adam_v;  // all numel() long

  int64_t numel() const { return static_cast<int64_t>(value.size()); }
};

// What StageModel exposes to the data-parallel all-reduce and to checkpoints: views into the
// store's buffers, valid as long as the model lives.
struct ParameterRef {
  std::string_view name;
  std::span<const int64_t> shape;
  std::span<float> value, grad, adam_m, adam_v;
};

class ParameterStore {
 public:
  // Adds a zero-filled tensor (value, grad and moments). The name must be new.
  Parameter* Add(std::string name, std::vector<int64_t> shape, bool weight_decay);
  // nullptr if no tensor has that name.
  Parameter* Find(std::string_view name);
  const Parameter* Find(std::string_view name) const;

  // In the order they were added (model order).
  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  std::vector<ParameterRef> Refs();
  int64_t NumElements() const;
  // Bytes of values, gradients and both moments.
  int64_t Bytes() const { return NumElements() * 4 * static_cast<int64_t>(sizeof(float)); }
  void ZeroGrad();

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
};

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_
