// ClockSync: the worker's estimate of (coordinator clock - worker clock), NTP-style, from the
// timestamps of each heartbeat. The sample with the shortest round trip wins, since its
// offset has the smallest error bound (half the round trip).
#ifndef PIPECOORD_WORKER_DAEMON_CLOCK_SYNC_H_
#define PIPECOORD_WORKER_DAEMON_CLOCK_SYNC_H_

#include <cstdint>
#include <mutex>

namespace pipecoord::worker {

class ClockSync {
 public:
  // t0: worker sent, t1: coordinator received, t2: coordinator sent, t3: worker received.
  void AddSample(int64_t t0, int64_t t1, int64_t t2, int64_t t3);
  int64_t offset_ns() const;
  int64_t round_trip_ns() const;  // of the sample in use; -1 before the first

 private:
  mutable std::mutex mu_;
  int64_t offset_ = 0;
  int64_t rtt_ = -1;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_CLOCK_SYNC_H_
