#include "worker/transport/device_allreduce.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace pipecoord::worker {

Status DeviceAllReduceSum(Transport& transport, int my_index, const std::vector<int>& group_ranks, int step,
                          DeviceFloatBuffer& data, std::chrono::milliseconds timeout, uint32_t channel) {
  using Clock = std::chrono::steady_clock;
  const int n = static_cast<int>(group_ranks.size());
  if (n == 0) return InvalidArgument("DeviceAllReduceSum: group_ranks is empty");
  if (my_index < 0 || my_index >= n) {
    return InvalidArgument("DeviceAllReduceSum: my_index must be in 0.." + std::to_string(n - 1) + " (the group has " +
                           std::to_string(n) + " members), got " + std::to_string(my_index));
  }
  if (std::set<int>(group_ranks.begin(), group_ranks.end()).size() != group_ranks.size()) {
    return InvalidArgument("DeviceAllReduceSum: group_ranks repeats a rank");
  }
  if (channel < kFirstCollectiveChannel) {
    return InvalidArgument("DeviceAllReduceSum: channel must be >= " + std::to_string(kFirstCollectiveChannel) +
                           " (0 and 1 carry activations and gradients), got " + std::to_string(channel));
  }
  if (n == 1) return Status::Ok();

  const Clock::time_point deadline = Clock::now() + timeout;
  const size_t len = data.size();
  // Chunk c is [c*L/n, (c+1)*L/n), as AllReduceSum cuts it.
  auto begin_of = [&](int c) { return static_cast<size_t>(c) * len / static_cast<size_t>(n); };
  auto count_of = [&](int c) { return begin_of(c + 1) - begin_of(c); };
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  const int right = group_ranks[mod(my_index + 1)];
  const int left = group_ranks[mod(my_index - 1)];
  // "DeviceAllReduceSum step 3 (member 1 of 4, rank 5): receiving chunk 0 in round 2 from rank 4"
  auto where = [&](const char* doing, int round, int c, const std::string& peer = "") {
    return "DeviceAllReduceSum step " + std::to_string(step) + " (member " + std::to_string(my_index) + " of " +
           std::to_string(n) + ", rank " + std::to_string(group_ranks[my_index]) + "): " + doing + " chunk " +
           std::to_string(c) + " in round " + std::to_string(round) + peer;
  };
  auto wrap = [](const Status& st, const std::string& at) { return Status(st.code(), at + ": " + st.message()); };

  // One round: send chunk `send_c` right, receive chunk `recv_c` from the left and add it
  // (reduce-scatter) or copy it (all-gather).
  auto round = [&](int r, int send_c, int recv_c, bool add) -> Status {
    auto out = data.Read(begin_of(send_c), count_of(send_c));
    if (!out.ok()) return wrap(out.status(), where("reading", r, send_c));
    Status st = transport.Send(right, MessageTag{channel, r, send_c, step}, std::move(out).value());
    if (!st.ok()) return wrap(st, where("sending", r, send_c, " to rank " + std::to_string(right)));
    const auto left_ms = std::max(std::chrono::milliseconds(0),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    const kernels::TensorSpec spec{kernels::DType::kF32, {static_cast<int64_t>(count_of(recv_c))}};
    auto in = transport.Recv(left, MessageTag{channel, r, recv_c, step}, spec, left_ms);
    if (!in.ok()) {
      const bool sizes = in.status().code() == Code::kInternal;
      return Status(in.status().code(), where("receiving", r, recv_c, " from rank " + std::to_string(left)) + ": " + in.status().message() +
                                            (sizes ? " (do all members pass the same data length?)" : ""));
    }
    st = add ? data.Add(begin_of(recv_c), *in) : data.Write(begin_of(recv_c), *in);
    return st.ok() ? st : wrap(st, where(add ? "adding" : "writing", r, recv_c));
  };

  for (int s = 0; s < n - 1; ++s) {
    PIPECOORD_RETURN_IF_ERROR(round(s, mod(my_index - s), mod(my_index - s - 1), /*add=*/true));
  }
  for (int s = 0; s < n - 1; ++s) {
    PIPECOORD_RETURN_IF_ERROR(round(n - 1 + s, mod(my_index + 1 - s), mod(my_index - s), /*add=*/false));
  }
  return Status::Ok();
}

}  // namespace pipecoord::worker
