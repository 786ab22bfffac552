// StreamWakeups: how the coordinator's long-lived streams (a worker's commands, a job's updates)
// wait without a thread each and wake alone. A stream subscribes a callback under a key ("a
// worker's commands", "a job's updates"); the core, under its own lock, notes that a key changed
// (Notify only queues it); one thread, owned here, then calls every subscriber of each queued
// key, outside the core's lock, so a callback may call back into the core. At 16k workers that is
// 16k subscriptions and one thread, where a thread per stream waiting on one condition variable
// woke all of them on every change (issue "one coordinator for 16,384 ranks").
//
// Thread-safe. Notifications of one key are coalesced: a subscriber learns that something may
// have changed, never what or how often, and reads the core's state itself. A callback must not
// block for long (it holds up every other subscriber's wakeup).
#ifndef PIPECOORD_COORDINATOR_STREAM_WAKEUPS_H_
#define PIPECOORD_COORDINATOR_STREAM_WAKEUPS_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace pipecoord::coordinator {

class StreamWakeups {
 public:
  StreamWakeups();
  ~StreamWakeups();  // stops the thread (subscribers are not called any more)
  StreamWakeups(const StreamWakeups&) = delete;
  StreamWakeups& operator=(const StreamWakeups&) = delete;

  // `ready` is called on the wakeup thread after each Notify of `key` (coalesced) or NotifyAll.
  // Returns the subscription's token (never 0).
  uint64_t Subscribe(const std::string& key, std::function<void()> ready);
  // After it returns, the token's `ready` is not running and is never called again: from another
  // thread it waits for a call in progress; inside a `ready` call (the wakeup thread) it returns
  // at once. Unknown tokens are ignored.
  void Unsubscribe(uint64_t token);
  // Queue a wakeup of `key`'s subscribers (cheap: callable under the caller's lock).
  void Notify(const std::string& key);
  void NotifyAll();

  size_t subscriptions() const;
  int64_t wakeups() const;  // subscriber calls made so far

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_token_ = 1;
  std::map<uint64_t, std::pair<std::string, std::function<void()>>> subs_;
  std::map<std::string, std::set<uint64_t>> by_key_;
  std::set<std::string> queued_;
  bool all_ = false;
  bool stop_ = false;
  int64_t wakeups_ = 0;
  // Held while callbacks run: Unsubscribe from another thread waits on it; recursive so that a
  // callback may unsubscribe (itself or another) on the wakeup thread.
  std::recursive_mutex calling_;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_STREAM_WAKEUPS_H_
