// ParameterStore: a stage's trainable tensors by name, each with its gradient and AdamW
// moments. Float storage; values and gradients never move once added (they are safe to point
// into).
//
// Moments and ZeRO: the store's elements in parameter order form one flat index space of N =
// NumElements(). ShardMoments(shards, index) gives the store AdamW moments for elements
// [ChunkBegin(N, shards, index), ChunkBegin(N, shards, index + 1)) only (worker/parallel/
// collectives.h's chunks: the chunk a reduce-scatter leaves summed on member `index`), in two
// flat buffers of ceil(N / shards) floats each: every shard the same size, as Megatron pads its
// distributed optimizer's buffers (the last shards' tail is padding, never read). Each
// parameter's moments are then views of its overlap with the shard (possibly empty). Tensors added after
// the last ShardMoments have no moments until the next: call it once all are added (one shard:
// the whole store). Bytes() counts values, the gradients (when not released), both moment
// buffers and the shard's gradient buffer.
#ifndef PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_
#define PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "kernels/host_pool.h"

namespace pipecoord::model {

struct Parameter {
  std::string name;            // e.g. "layers.3.attention.wq" (Llama's names)
  std::vector<int64_t> shape;  // row-major
  bool weight_decay = true;    // AdamW decays matrices, not norm gains
  kernels::HostBuffer<float> value, grad;  // numel() long
  // AdamW moments of elements [moment_begin, moment_begin + adam_m.size()) of this tensor (all of
  // it, or its overlap with the store's shard), views into the store's moment buffers.
  int64_t moment_begin = 0;
  std::span<float> adam_m, adam_v;
  int64_t offset = 0;  // of the tensor's first element in the store's flat index space

  int64_t numel() const { return static_cast<int64_t>(value.size()); }
};

// What StageModel exposes to the data-parallel all-reduce and to checkpoints: views into the
// store's buffers, valid as long as the model lives.
struct ParameterRef {
  std::string_view name;
  std::span<const int64_t> shape;
  std::span<float> value, grad;
  int64_t moment_begin = 0;         // adam_m and adam_v are elements [moment_begin, + their size)
  std::span<float> adam_m, adam_v;  // of the tensor (Parameter's)
  bool weight_decay = true;
};

class ParameterStore {
 public:
  // Adds a zero-filled tensor (value and grad; its moments come with ShardMoments). The name must
  // be new.
  Parameter* Add(std::string name, std::vector<int64_t> shape, bool weight_decay);
  // Zero-filled moments for shard `index` of `shards` (see above); 0 <= index < shards. Resets
  // every moment to zero (call before training, or restore them from a checkpoint after).
  void ShardMoments(int shards, int index);
  int shards() const { return shards_; }
  // ZeRO-2: ReleaseGradients copies the shard's elements of every tensor's gradient into a flat
  // buffer of ceil(N / shards) floats (like the moments) and frees the tensors' gradients (empty
  // vectors); RestoreGradients frees that buffer and allocates the gradients again, zero, and
  // returns true when it did (views into them must then be taken again). So the store holds the
  // whole gradients or the shard's, never both. OptimizerGrad is the
  // gradient of the elements a tensor's moments cover, wherever it lives now.
  void KeepShardGradients();
  void ReleaseGradients();
  bool RestoreGradients();
  bool gradients_released() const { return released_; }
  std::span<float> OptimizerGrad(const Parameter& p) const;
  // The store's elements whose moments it holds: [shard_begin(), shard_end()).
  int64_t shard_begin() const { return shard_begin_; }
  int64_t shard_end() const { return shard_end_; }
  // nullptr if no tensor has that name.
  Parameter* Find(std::string_view name);
  const Parameter* Find(std::string_view name) const;

  // In the order they were added (model order).
  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  std::vector<ParameterRef> Refs();
  int64_t NumElements() const;
  // Bytes of values, gradients and both moment buffers (padding included).
  int64_t Bytes() const {
    return (NumElements() * (released_ ? 1 : 2) +
            static_cast<int64_t>(adam_m_.size() + adam_v_.size() + shard_grad_.size())) *
           static_cast<int64_t>(sizeof(float));
  }
  void ZeroGrad();  // the tensors' gradients, or the shard's while they are released

 private:
  std::vector<std::unique_ptr<Parameter>> params_;
  int shards_ = 1;
  int64_t shard_begin_ = 0, shard_end_ = 0;
  kernels::HostBuffer<float> adam_m_, adam_v_;  // ceil(N / shards) each
  kernels::HostBuffer<float> shard_grad_;       // ZeRO-2, while released: ceil(N / shards)
  bool shard_gradients_ = false;        // ZeRO-2 (KeepShardGradients)
  bool released_ = false;
};

// A ZeRO shard request, as every backend's stage model checks it: INVALID_ARGUMENT unless
// shards >= 1 and 0 <= index < shards; FAILED_PRECONDITION once the optimizer has stepped (the
// moments are sharded before the first step).
Status CheckOptimizerShard(int shards, int index, int64_t optimizer_steps);

}  // namespace pipecoord::model

#endif  // PIPECOORD_WORKER_MODEL_PARAMETER_STORE_H_
