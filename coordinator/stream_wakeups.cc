#include "coordinator/stream_wakeups.h"

#include <vector>

namespace pipecoord::coordinator {

StreamWakeups::StreamWakeups() : thread_([this] { Run(); }) {}

StreamWakeups::~StreamWakeups() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t StreamWakeups::Subscribe(const std::string& key, std::function<void()> ready) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t token = next_token_++;
  subs_[token] = {key, std::move(ready)};
  by_key_[key].insert(token);
  return token;
}

void StreamWakeups::Unsubscribe(uint64_t token) {
  std::lock_guard<std::recursive_mutex> calling(calling_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = subs_.find(token);
  if (it == subs_.end()) return;
  auto k = by_key_.find(it->second.first);
  if (k != by_key_.end()) {
    k->second.erase(token);
    if (k->second.empty()) by_key_.erase(k);
  }
  subs_.erase(it);
}

void StreamWakeups::Notify(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (by_key_.count(key) == 0) return;  // nobody waits on it
    queued_.insert(key);
  }
  cv_.notify_one();
}

void StreamWakeups::NotifyAll() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    all_ = true;
  }
  cv_.notify_one();
}

size_t StreamWakeups::subscriptions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subs_.size();
}

int64_t StreamWakeups::wakeups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wakeups_;
}

void StreamWakeups::Run() {
  for (;;) {
    std::vector<uint64_t> tokens;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || all_ || !queued_.empty(); });
      if (stop_) return;
      if (all_) {
        for (const auto& [token, sub] : subs_) tokens.push_back(token);
      } else {
        for (const std::string& key : queued_) {
          if (auto k = by_key_.find(key); k != by_key_.end()) tokens.insert(tokens.end(), k->second.begin(), k->second.end());
        }
      }
      all_ = false;
      queued_.clear();
    }
    std::lock_guard<std::recursive_mutex> calling(calling_);
    for (uint64_t token : tokens) {
      std::function<void()> ready;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = subs_.find(token);
        if (it == subs_.end() || stop_) continue;  // unsubscribed meanwhile
        ready = it->second.second;
        ++wakeups_;
      }
      ready();
    }
  }
}

}  // namespace pipecoord::coordinator
