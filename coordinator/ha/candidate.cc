#include "coordinator/ha/candidate.h"

namespace pipecoord::coordinator::ha {

using Clock = std::chrono::steady_clock;

Candidate::Candidate(EtcdClient* client, CandidateOptions options, std::function<void(const Status&)> on_lost)
    : client_(client), options_(std::move(options)), on_lost_(std::move(on_lost)) {
  keepalive_ = std::thread([this] { KeepAliveLoop(); });
}

Candidate::~Candidate() {
  int64_t lease;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    lease = lease_;
  }
  cv_.notify_all();
  keepalive_.join();
  if (lease != 0) client_->RevokeLease(lease);  // resigns: a standby need not wait for the TTL
}

void Candidate::KeepAliveLoop() {
  const auto period = std::chrono::milliseconds(std::max(300, options_.lease_ttl_s * 1000 / 3));
  Clock::time_point last_renewed = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_ || lease_ == 0) {
      last_renewed = Clock::now();
      continue;
    }
    const int64_t lease = lease_;
    lock.unlock();
    Result<int64_t> ttl = client_->KeepAlive(lease);
    lock.lock();
    if (ttl.ok() && *ttl > 0) {
      last_renewed = Clock::now();
      continue;
    }
    const bool gone = (ttl.ok() && *ttl <= 0) || ttl.status().code() == Code::kNotFound;
    const bool stale = Clock::now() - last_renewed > std::chrono::seconds(options_.lease_ttl_s);
    if (!gone && !stale) continue;  // etcd unreachable for now: the lease may still hold
    if (!elected_) {
      lease_ = 0;  // standing by: WaitUntilElected grants a new one
      continue;
    }
    const std::string why = gone ? "its lease expired (paused or cut off from etcd for longer than --ha-lease-s)"
                                 : "its lease could not be renewed for --ha-lease-s (" +
                                       (ttl.ok() ? std::string("no answer") : ttl.status().message()) + ")";
    lease_ = 0;
    elected_ = false;
    lock.unlock();
    if (on_lost_) on_lost_(FailedPrecondition("no longer the elected coordinator: " + why));
    lock.lock();
  }
}

Result<const EtcdLeadership*> Candidate::WaitUntilElected(const std::atomic<bool>& stop,
                                                          const std::function<void(const std::string&)>& waiting) {
  std::string said;
  auto say = [&](const std::string& line) {
    if (line != said && waiting) waiting(line);
    said = line;
  };
  while (!stop.load()) {
    int64_t lease;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lease = lease_;
    }
    if (lease == 0) {
      Result<int64_t> granted = client_->GrantLease(options_.lease_ttl_s);
      if (!granted.ok()) {
        say("waiting for etcd: " + granted.status().message());
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      lease = *granted;
      std::lock_guard<std::mutex> lock(mu_);
      lease_ = lease;
    }
    Result<std::string> leader = client_->Leader(options_.election);
    if (leader.ok()) say("standing by: the active coordinator is " + *leader);
    Result<EtcdLeadership> won = client_->Campaign(options_.election, lease, options_.value, stop);
    if (!won.ok()) {
      if (stop.load()) break;
      if (won.status().code() == Code::kNotFound) {  // the lease expired while we waited
        std::lock_guard<std::mutex> lock(mu_);
        if (lease_ == lease) lease_ = 0;
      } else {
        say("waiting for etcd: " + won.status().message());
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (lease_ != lease) continue;  // the lease expired as we were elected: campaign again
    leadership_ = *won;
    elected_ = true;
    return &leadership_;
  }
  return Unavailable("stopped while standing by");
}

}  // namespace pipecoord::coordinator::ha
