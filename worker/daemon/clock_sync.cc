#include "worker/daemon/clock_sync.h"

namespace pipecoord::worker {

void ClockSync::AddSample(int64_t t0, int64_t t1, int64_t t2, int64_t t3) {
  const int64_t rtt = (t3 - t0) - (t2 - t1);
  const int64_t offset = ((t1 - t0) + (t2 - t3)) / 2;
  std::lock_guard<std::mutex> lock(mu_);
  if (rtt_ < 0 || rtt <= rtt_) {
    rtt_ = rtt < 0 ? 0 : rtt;
    offset_ = offset;
  }
}

int64_t ClockSync::offset_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

int64_t ClockSync::round_trip_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rtt_;
}

}  // namespace pipecoord::worker
