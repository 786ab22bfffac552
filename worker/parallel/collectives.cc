#include "worker/parallel/collectives.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>

namespace pipecoord::worker::parallel {

HostFloats::HostFloats(std::vector<std::span<float>> parts) : parts_(std::move(parts)) {
  for (auto p : parts_) size_ += p.size();
}

template <typename F>
void HostFloats::ForEachPiece(size_t begin, size_t count, F f) {
  size_t at = 0, done = 0;  // at: where the part starts in the buffer
  for (auto p : parts_) {
    if (done == count) return;
    const size_t end = at + p.size();
    if (begin + done < end) {
      const size_t from = begin + done - at, n = std::min(p.size() - from, count - done);
      f(p.subspan(from, n), done);
      done += n;
    }
    at = end;
  }
}

namespace {

// The chunk's host f32 values, if it has them and they fit at `begin`.
Result<std::span<const float>> HostChunk(const kernels::Tensor& chunk, size_t begin, size_t size) {
  std::span<const float> src = chunk.host_span<float>();
  if (src.size() != static_cast<size_t>(chunk.numel())) {
    return FailedPrecondition("HostFloats: a received chunk is not host f32 memory");
  }
  if (begin + src.size() > size) {
    return InvalidArgument("HostFloats: chunk [" + std::to_string(begin) + ", " + std::to_string(begin + src.size()) +
                           ") is outside the buffer of " + std::to_string(size));
  }
  return src;
}

}  // namespace

Result<kernels::Tensor> HostFloats::Read(size_t begin, size_t count) {
  if (begin + count > size_) return InvalidArgument("HostFloats: reading past the end");
  std::vector<float> out(count);
  ForEachPiece(begin, count, [&](std::span<float> piece, size_t at) { std::copy(piece.begin(), piece.end(), out.begin() + at); });
  return kernels::Tensor::FromVector(std::move(out));
}

Status HostFloats::Add(size_t begin, const kernels::Tensor& chunk) {
  auto src = HostChunk(chunk, begin, size_);
  if (!src.ok()) return src.status();
  ForEachPiece(begin, src->size(), [&](std::span<float> piece, size_t at) {
    for (size_t k = 0; k < piece.size(); ++k) piece[k] = (*src)[at + k] + piece[k];
  });
  return Status::Ok();
}

Status HostFloats::Write(size_t begin, const kernels::Tensor& chunk) {
  auto src = HostChunk(chunk, begin, size_);
  if (!src.ok()) return src.status();
  ForEachPiece(begin, src->size(), [&](std::span<float> piece, size_t at) {
    std::copy(src->begin() + at, src->begin() + at + piece.size(), piece.begin());
  });
  return Status::Ok();
}

Status HostFloats::Scale(size_t begin, size_t count, float factor) {
  if (begin > size_ || count > size_ - begin) {
    return InvalidArgument("Scale: [" + std::to_string(begin) + ", " + std::to_string(begin + count) +
                           ") is outside the buffer's " + std::to_string(size_) + " elements");
  }
  ForEachPiece(begin, count, [&](std::span<float> piece, size_t) {
    for (float& x : piece) x *= factor;
  });
  return Status::Ok();
}

namespace {

using Clock = std::chrono::steady_clock;

Status CheckGroup(const char* name, const Group& g, uint32_t channel) {
  const int n = static_cast<int>(g.ranks.size());
  if (n == 0) return InvalidArgument(std::string(name) + ": the group is empty");
  if (g.me < 0 || g.me >= n) {
    return InvalidArgument(std::string(name) + ": the member index must be in 0.." + std::to_string(n - 1) +
                           " (the group has " + std::to_string(n) + " members), got " + std::to_string(g.me));
  }
  if (std::set<int>(g.ranks.begin(), g.ranks.end()).size() != g.ranks.size()) {
    return InvalidArgument(std::string(name) + ": the group repeats a rank");
  }
  if (channel < kFirstCollectiveChannel) {
    return InvalidArgument(std::string(name) + ": channel must be >= " + std::to_string(kFirstCollectiveChannel) +
                           " (0 and 1 carry activations and gradients), got " + std::to_string(channel));
  }
  return Status::Ok();
}

// One ring collective's rounds: each round sends one chunk right and receives one from the left,
// adding it in (reduce-scatter rounds) or writing it (all-gather rounds).
class Ring {
 public:
  Ring(const char* name, Transport& transport, const Group& group, int step, FloatBuffer& data,
       const RingOptions& options)
      : name_(name), transport_(transport), group_(group), step_(step), data_(data), options_(options),
        n_(static_cast<int>(group.ranks.size())), deadline_(Clock::now() + options.timeout),
        right_(group.ranks[Mod(group.me + 1)]), left_(group.ranks[Mod(group.me - 1)]) {}

  int Mod(int x) const { return ((x % n_) + n_) % n_; }

  // n - 1 rounds numbered from `first_round`; in round s member i sends chunk i + offset - s and
  // receives chunk i + offset - s - 1 (mod n). Reduce-scatter rounds (add) leave member i the sum
  // of chunk i + 1 + offset over members i + 1 + offset, i + 2 + offset, ...; all-gather rounds
  // spread the chunk i + offset each member starts with.
  Status Rounds(int first_round, int offset, bool add) {
    const int me = group_.me + offset;
    for (int s = 0; s < n_ - 1; ++s) {
      PIPECOORD_RETURN_IF_ERROR(Round(first_round + s, Mod(me - s), Mod(me - s - 1), add));
    }
    return Status::Ok();
  }

 private:
  size_t Begin(int c) const { return ChunkBegin(data_.size(), n_, c); }
  size_t Count(int c) const { return Begin(c + 1) - Begin(c); }
  // "AllReduceSum step 3 (member 1 of 4, rank 5): receiving chunk 0 in round 2 from rank 4"
  std::string Where(const char* doing, int round, int c, const std::string& peer = "") const {
    return std::string(name_) + " step " + std::to_string(step_) + " (member " + std::to_string(group_.me) + " of " +
           std::to_string(n_) + ", rank " + std::to_string(group_.ranks[group_.me]) + "): " + doing + " chunk " +
           std::to_string(c) + " in round " + std::to_string(round) + peer;
  }
  static Status Wrap(const Status& st, const std::string& at) { return Status(st.code(), at + ": " + st.message()); }

  Status Round(int r, int send_c, int recv_c, bool add) {
    auto out = data_.Read(Begin(send_c), Count(send_c));
    if (!out.ok()) return Wrap(out.status(), Where("reading", r, send_c));
    if (options_.bytes_sent != nullptr) *options_.bytes_sent += Count(send_c) * sizeof(float);
    Status st = transport_.Send(right_, MessageTag{options_.channel, r, send_c, step_}, std::move(out).value());
    if (!st.ok()) return Wrap(st, Where("sending", r, send_c, " to rank " + std::to_string(right_)));
    const auto left_ms = std::max(std::chrono::milliseconds(0),
                                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()));
    const kernels::TensorSpec spec{kernels::DType::kF32, {static_cast<int64_t>(Count(recv_c))}};
    auto in = transport_.Recv(left_, MessageTag{options_.channel, r, recv_c, step_}, spec, left_ms);
    if (!in.ok()) {
      const bool sizes = in.status().code() == Code::kInternal;
      return Status(in.status().code(), Where("receiving", r, recv_c, " from rank " + std::to_string(left_)) + ": " +
                                            in.status().message() +
                                            (sizes ? " (do all members pass the same data length?)" : ""));
    }
    st = add ? data_.Add(Begin(recv_c), *in) : data_.Write(Begin(recv_c), *in);
    return st.ok() ? st : Wrap(st, Where(add ? "adding" : "writing", r, recv_c));
  }

  const char* name_;
  Transport& transport_;
  const Group& group_;
  int step_;
  FloatBuffer& data_;
  RingOptions options_;
  int n_;
  Clock::time_point deadline_;
  int right_, left_;
};

}  // namespace

Status AllReduceSum(Transport& transport, const Group& group, int step, FloatBuffer& data, const RingOptions& options) {
  PIPECOORD_RETURN_IF_ERROR(CheckGroup("AllReduceSum", group, options.channel));
  if (group.ranks.size() == 1) return Status::Ok();
  Ring ring("AllReduceSum", transport, group, step, data, options);
  const int n = static_cast<int>(group.ranks.size());
  // Member i ends the reduce-scatter holding chunk i + 1 and starts the gather from it.
  PIPECOORD_RETURN_IF_ERROR(ring.Rounds(0, 0, /*add=*/true));
  return ring.Rounds(n - 1, 1, /*add=*/false);
}

Status ReduceScatterSum(Transport& transport, const Group& group, int step, FloatBuffer& data,
                        const RingOptions& options) {
  PIPECOORD_RETURN_IF_ERROR(CheckGroup("ReduceScatterSum", group, options.channel));
  if (group.ranks.size() == 1) return Status::Ok();
  return Ring("ReduceScatterSum", transport, group, step, data, options).Rounds(0, -1, /*add=*/true);
}

Status AllGather(Transport& transport, const Group& group, int step, FloatBuffer& data, const RingOptions& options) {
  PIPECOORD_RETURN_IF_ERROR(CheckGroup("AllGather", group, options.channel));
  if (group.ranks.size() == 1) return Status::Ok();
  return Ring("AllGather", transport, group, step, data, options).Rounds(0, 0, /*add=*/false);
}

Status AllReduceMean(Transport& transport, const Group& group, int step, std::vector<std::span<float>> data,
                     const RingOptions& options) {
  HostFloats buffer(std::move(data));
  PIPECOORD_RETURN_IF_ERROR(AllReduceSum(transport, group, step, buffer, options));
  if (group.ranks.size() > 1) {
    PIPECOORD_RETURN_IF_ERROR(buffer.Scale(0, buffer.size(), 1.0f / static_cast<float>(group.ranks.size())));
  }
  return Status::Ok();
}

Status ReduceScatterMean(Transport& transport, const Group& group, int step, FloatBuffer& data,
                         const RingOptions& options) {
  PIPECOORD_RETURN_IF_ERROR(ReduceScatterSum(transport, group, step, data, options));
  const int n = static_cast<int>(group.ranks.size());
  if (n == 1) return Status::Ok();
  const size_t begin = ChunkBegin(data.size(), n, group.me), end = ChunkBegin(data.size(), n, group.me + 1);
  return data.Scale(begin, end - begin, 1.0f / static_cast<float>(n));
}

Status ReduceScatterMean(Transport& transport, const Group& group, int step, std::vector<std::span<float>> data,
                         const RingOptions& options) {
  HostFloats buffer(std::move(data));
  return ReduceScatterMean(transport, group, step, buffer, options);
}

}  // namespace pipecoord::worker::parallel
