#include "worker/checkpoint/async_writer.h"

#include <algorithm>
#include <utility>

namespace pipecoord::worker {

AsyncCheckpointWriter::AsyncCheckpointWriter(std::string dir, std::string job_id, int global_rank, int keep)
    : dir_(std::move(dir)), job_id_(std::move(job_id)), global_rank_(global_rank), keep_(keep) {}

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (writer_.joinable()) writer_.join();
}

Status AsyncCheckpointWriter::Wait() {
  if (writer_.joinable()) writer_.join();
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

Status AsyncCheckpointWriter::Save(const CheckpointInfo& info, const std::vector<StateTensor>& tensors) {
  PIPECOORD_RETURN_IF_ERROR(Wait());  // the staging buffers are free again
  names_.resize(tensors.size());
  data_.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    names_[i] = tensors[i].name;
    data_[i].assign(tensors[i].data.begin(), tensors[i].data.end());  // reuses the capacity of the last save
  }
  writer_ = std::thread([this, info] {
    std::vector<StateTensor> staged(names_.size());
    for (size_t i = 0; i < staged.size(); ++i) staged[i] = {names_[i], std::span<float>(data_[i])};
    Status st = WriteCheckpointFile(dir_, job_id_, global_rank_, info, staged, keep_, keep_from_.load());
    std::lock_guard<std::mutex> lock(mu_);
    if (st.ok()) {
      durable_.push_back(info.step);
    } else {
      failed_ = std::move(st);
    }
  });
  return Status::Ok();
}

void AsyncCheckpointWriter::KeepFrom(int64_t step) {
  int64_t now = keep_from_.load();
  while (!keep_from_.compare_exchange_weak(now, now == kNoFloor ? step : std::max(now, step))) {
  }
}

Result<std::vector<int64_t>> AsyncCheckpointWriter::TakeDurable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  return std::exchange(durable_, {});
}

}  // namespace pipecoord::worker
