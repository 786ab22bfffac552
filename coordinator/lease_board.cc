#include "coordinator/lease_board.h"

namespace pipecoord::coordinator {

void LeaseBoard::Add(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  workers_[worker_id].reset();
}

void LeaseBoard::Remove(const std::string& worker_id) {
  std::lock_guard<std::mutex> lock(mu_);
  workers_.erase(worker_id);  // its id stays in order_ until Take skips it
}

bool LeaseBoard::Record(const std::string& worker_id, Clock::time_point at, int64_t recv_ns, const v1::Progress* progress) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  std::optional<Beat>& beat = it->second;
  if (!beat) {
    beat.emplace();
    beat->worker_id = worker_id;
    order_.push_back(worker_id);
  }
  beat->at = std::max(beat->at, at);
  if (progress != nullptr) {
    beat->progress = *progress;
    beat->recv_ns = recv_ns;
  } else if (!beat->progress) {
    beat->recv_ns = recv_ns;
  }
  return true;
}

std::vector<LeaseBoard::Beat> LeaseBoard::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Beat> out;
  out.reserve(order_.size());
  for (const std::string& id : order_) {
    auto it = workers_.find(id);
    if (it == workers_.end() || !it->second) continue;  // removed since (or re-added with no beat)
    out.push_back(std::move(*it->second));
    it->second.reset();
  }
  order_.clear();
  return out;
}

size_t LeaseBoard::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, beat] : workers_) n += beat.has_value();
  return n;
}

}  // namespace pipecoord::coordinator
