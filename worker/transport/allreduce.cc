#include "worker/transport/allreduce.h"

#include <algorithm>
#include <set>
#include <string>

namespace pipecoord::worker {

Status AllReduceSum(Transport& transport, int my_index, const std::vector<int>& group_ranks,
                    int step, std::span<float> data, std::chrono::milliseconds timeout,
                    uint32_t channel) {
  using Clock = std::chrono::steady_clock;
  const int n = static_cast<int>(group_ranks.size());
  if (n == 0) return InvalidArgument("AllReduceSum: group_ranks is empty");
  if (my_index < 0 || my_index >= n) {
    return InvalidArgument("AllReduceSum: my_index must be in 0.." + std::to_string(n - 1) +
                           " (the group has " + std::to_string(n) + " members), got " +
                           std::to_string(my_index));
  }
  if (std::set<int>(group_ranks.begin(), group_ranks.end()).size() != group_ranks.size()) {
    return InvalidArgument("AllReduceSum: group_ranks repeats a rank");
  }
  if (channel < kFirstCollectiveChannel) {
    return InvalidArgument("AllReduceSum: channel must be >= " +
                           std::to_string(kFirstCollectiveChannel) +
                           " (0 and 1 carry activations and gradients), got " +
                           std::to_string(channel));
  }
  if (n == 1) return Status::Ok();

  const Clock::time_point deadline = Clock::now() + timeout;
  const size_t len = data.size();
  auto begin_of = [&](int c) { return static_cast<size_t>(c) * len / static_cast<size_t>(n); };
  auto chunk = [&](int c) { return data.subspan(begin_of(c), begin_of(c + 1) - begin_of(c)); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  const int right = group_ranks[mod(my_index + 1)];
  const int left = group_ranks[mod(my_index - 1)];
  // "AllReduceSum step 3 (member 1 of 4, rank 5): receiving chunk 0 in round 2 from rank 4"
  auto where = [&](bool sending, int round, int c) {
    return "AllReduceSum step " + std::to_string(step) + " (member " + std::to_string(my_index) +
           " of " + std::to_string(n) + ", rank " + std::to_string(group_ranks[my_index]) +
           "): " + (sending ? "sending" : "receiving") + " chunk " + std::to_string(c) +
           " in round " + std::to_string(round) + (sending ? " to rank " : " from rank ") +
           std::to_string(sending ? right : left);
  };

  // One round: send chunk `send_c` right, receive chunk `recv_c` from the left and either add
  // it (reduce-scatter) or copy it (all-gather).
  auto round = [&](int r, int send_c, int recv_c, bool add) -> Status {
    std::span<const float> out = chunk(send_c);
    Status st = transport.SendFloats(right, MessageTag{channel, r, send_c, step},
                                     std::vector<float>(out.begin(), out.end()));
    if (!st.ok()) return Status(st.code(), where(true, r, send_c) + ": " + st.message());
    const auto left_ms = std::max(std::chrono::milliseconds(0),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - Clock::now()));
    std::span<float> dst = chunk(recv_c);
    Result<std::vector<float>> in =
        transport.RecvFloats(left, MessageTag{channel, r, recv_c, step}, dst.size(), left_ms);
    if (!in.ok()) {
      const bool sizes = in.status().code() == Code::kInternal;
      return Status(in.status().code(), where(false, r, recv_c) + ": " + in.status().message() +
                                            (sizes ? " (do all members pass the same data length?)" : ""));
    }
    const float* src = in->data();
    if (add) {
      for (size_t k = 0; k < dst.size(); ++k) dst[k] = src[k] + dst[k];
    } else {
      std::copy(src, src + dst.size(), dst.begin());
    }
    return Status::Ok();
  };

  for (int s = 0; s < n - 1; ++s) {
    PIPECOORD_RETURN_IF_ERROR(round(s, mod(my_index - s), mod(my_index - s - 1), /*add=*/true));
  }
  for (int s = 0; s < n - 1; ++s) {
    PIPECOORD_RETURN_IF_ERROR(
        round(n - 1 + s, mod(my_index + 1 - s), mod(my_index - s), /*add=*/false));
  }
  return Status::Ok();
}

}  // namespace pipecoord::worker
