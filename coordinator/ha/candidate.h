// Candidate: one coordinator's place in its election (etcd's election service over a lease of
// its own). WaitUntilElected blocks while another coordinator is active (this one is a standby);
// once elected, a keep-alive thread renews the lease every TTL/3, and `on_lost` runs (once) when
// the lease is gone or could not be renewed for a whole TTL: by then etcd may have elected
// another coordinator, so this one must stop acting at once (main.cc exits). Destroying the
// candidate revokes its lease: a standby is elected at once on a graceful stop, not after a TTL.
//
// Thread safety: WaitUntilElected from one thread; on_lost runs on the keep-alive thread.
#ifndef PIPECOORD_COORDINATOR_HA_CANDIDATE_H_
#define PIPECOORD_COORDINATOR_HA_CANDIDATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "coordinator/ha/etcd_client.h"

namespace pipecoord::coordinator::ha {

struct CandidateOptions {
  std::string election;  // etcd election name, e.g. "/pipecoord/default/leader"
  std::string value;     // what Leader() tells of this one: its gRPC address
  int lease_ttl_s = 5;   // how long an active coordinator may be silent before a standby takes over
};

class Candidate {
 public:
  // `client` must outlive the candidate.
  Candidate(EtcdClient* client, CandidateOptions options, std::function<void(const Status&)> on_lost);
  ~Candidate();
  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;

  // Blocks until elected (the leadership stays valid for the candidate's life) or `stop` turns
  // true (UNAVAILABLE). `waiting` is called (from this thread) with a line to print each time the
  // wait changes: etcd unreachable, standing by behind a leader.
  Result<const EtcdLeadership*> WaitUntilElected(const std::atomic<bool>& stop,
                                                 const std::function<void(const std::string&)>& waiting);

 private:
  void KeepAliveLoop();

  EtcdClient* client_;
  CandidateOptions options_;
  std::function<void(const Status&)> on_lost_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t lease_ = 0;          // 0: none (yet, or it expired while standing by)
  bool elected_ = false;
  bool stopping_ = false;
  EtcdLeadership leadership_;
  std::thread keepalive_;
};

}  // namespace pipecoord::coordinator::ha

#endif  // PIPECOORD_COORDINATOR_HA_CANDIDATE_H_
