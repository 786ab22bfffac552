// LocalRendezvous: the key-value rendezvous NcclTransport::Connect needs, for ranks that live in
// one process (tests, benchmarks, an in-process run). Between processes the worker uses the
// coordinator's Rendezvous RPC instead.
#ifndef PIPECOORD_WORKER_TRANSPORT_LOCAL_RENDEZVOUS_H_
#define PIPECOORD_WORKER_TRANSPORT_LOCAL_RENDEZVOUS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"

namespace pipecoord::worker {

class LocalRendezvous {
 public:
  // A wait for a key gives up (UNAVAILABLE naming the key) after `wait_timeout`.
  explicit LocalRendezvous(std::chrono::milliseconds wait_timeout = std::chrono::milliseconds(30000))
      : wait_timeout_(wait_timeout) {}

  // Publishes `value` under `key` when it is not empty (and returns it); otherwise waits for the
  // key's value. NcclTransport's RendezvousFn contract.
  Result<std::string> Call(const std::string& key, const std::string& value) {
    std::unique_lock lock(mu_);
    if (!value.empty()) {
      values_[key] = value;
      cv_.notify_all();
      return value;
    }
    if (!cv_.wait_for(lock, wait_timeout_, [&] { return values_.count(key) != 0; })) {
      return Unavailable("rendezvous: nothing was published under " + key + " within " +
                         std::to_string(wait_timeout_.count()) + " ms");
    }
    return values_.at(key);
  }

  // The function to hand to Connect; this object must outlive its calls.
  std::function<Result<std::string>(const std::string&, const std::string&)> Fn() {
    return [this](const std::string& key, const std::string& value) { return Call(key, value); };
  }

 private:
  const std::chrono::milliseconds wait_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_LOCAL_RENDEZVOUS_H_
