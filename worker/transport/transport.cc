#include "worker/transport/transport.h"

namespace pipecoord::worker {

Status Transport::SendFloats(int peer, const MessageTag& tag, std::vector<float> data) {
  return Send(peer, tag, kernels::Tensor::FromVector(std::move(data)));
}

Result<std::vector<float>> Transport::RecvFloats(int peer, const MessageTag& tag, size_t count,
                                                 std::chrono::milliseconds timeout) {
  auto t = Recv(peer, tag, {kernels::DType::kF32, {static_cast<int64_t>(count)}}, timeout);
  if (!t.ok()) return t.status();
  return t->TakeFloats();
}

std::string ToString(const MessageTag& tag) {
  return "{channel " + std::to_string(tag.channel) + ", stage " + std::to_string(tag.stage) +
         ", mb " + std::to_string(tag.mb) + ", step " + std::to_string(tag.step) + "}";
}

}  // namespace pipecoord::worker
