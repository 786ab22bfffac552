// LeaseBoard: what a heartbeat needs, behind its own small lock, so that a heartbeat never waits
// for the coordinator's core lock. At 4,096 ranks one step's telemetry held that lock for seconds
// (bench/fleet_telemetry_bench), heartbeats queued behind it past the 5 s lease, and a job failed
// on a lease "lost" by a worker that was alive and beating.
//
// A heartbeat is recorded here (Record: its time and progress, the latest per worker) before
// anything else; the core takes the recorded beats (Take) whenever it holds its lock, and always
// before it expires leases, so a lease runs from the time a beat arrived however late the core
// applies it. The core registers and removes ids under its own lock (Add, Remove); a beat for an
// id not here is refused (not registered, or its lease already ran out).
//
// Thread-safe. No I/O, no gRPC types.
#ifndef PIPECOORD_COORDINATOR_LEASE_BOARD_H_
#define PIPECOORD_COORDINATOR_LEASE_BOARD_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/telemetry.pb.h"  // Progress

namespace pipecoord::coordinator {

class LeaseBoard {
 public:
  using Clock = std::chrono::steady_clock;
  struct Beat {
    std::string worker_id;
    Clock::time_point at;
    int64_t recv_ns = 0;                  // wall clock, as the hang check reads it
    std::optional<v1::Progress> progress;  // the beat's, when it carried one
  };

  void Add(const std::string& worker_id);
  // Forgets the id and any beat of it not taken yet.
  void Remove(const std::string& worker_id);
  // A heartbeat of `worker_id` at `at`: false if the id is not registered. A later beat of the
  // same worker replaces one not taken yet (its lease runs from the later time; its progress is
  // the newer), except that a beat without progress keeps the pending beat's progress.
  bool Record(const std::string& worker_id, Clock::time_point at, int64_t recv_ns, const v1::Progress* progress);
  // Every beat recorded since the last Take, each worker's once, in no particular order.
  std::vector<Beat> Take();
  size_t pending() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::optional<Beat>> workers_;  // registered id -> its beat not taken
  std::vector<std::string> order_;  // ids with a beat not taken (each once)
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_LEASE_BOARD_H_
