// PoolTransport: device tensors (and the executor's few host ones: the gradient norm's float)
// between the ranks of one process, for the worker/cuda tests that
// run one executor per rank (each rank its own CudaDevice): Send copies the tensor to the host
// and lets go of it at once (the sender's pool frees it; or keeps it a while: SentTensors), Recv
// allocates the received tensor from the receiver's pool and uploads it there. On the host double "device" tensors are host memory
// and the copies are memcpy; on a GPU they are the real downloads and uploads (Download waits for
// the producer's stream, Upload is queued on the consumer's).
#ifndef PIPECOORD_WORKER_CUDA_POOL_TRANSPORT_FOR_TESTS_H_
#define PIPECOORD_WORKER_CUDA_POOL_TRANSPORT_FOR_TESTS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/cuda/cuda_device.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker::cuda {

// Messages between the ranks of one process, held as host bytes.
class Mailbox {
 public:
  struct Message {
    std::vector<char> bytes;
    bool host = false;  // sent from host memory: received into host memory
  };

  void Put(int from, int to, const MessageTag& tag, std::vector<char> bytes, bool host = false) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      messages_[Key(from, to, tag)].push_back(Message{std::move(bytes), host});
    }
    cv_.notify_all();
  }

  Result<Message> Take(int from, int to, const MessageTag& tag, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto key = Key(from, to, tag);
    const bool arrived = cv_.wait_for(lock, timeout, [&] {
      auto it = messages_.find(key);
      return shutdown_ || (it != messages_.end() && !it->second.empty());
    });
    auto it = messages_.find(key);
    if (!arrived || it == messages_.end() || it->second.empty()) {
      return Unavailable("PoolTransport: no message " + ToString(tag) + " from rank " + std::to_string(from) +
                         (shutdown_ ? " (shut down)" : " (timed out)"));
    }
    Message m = std::move(it->second.front());
    it->second.pop_front();
    return m;
  }

  void Shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
  }

 private:
  using MessageKey = std::tuple<int, int, uint32_t, int32_t, int32_t, int32_t>;
  static MessageKey Key(int from, int to, const MessageTag& t) { return {from, to, t.channel, t.stage, t.mb, t.step}; }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<MessageKey, std::deque<Message>> messages_;
  bool shutdown_ = false;
};

// What Send does with the sent tensor once its bytes are in the mailbox.
enum class SentTensors {
  kReleased,  // lets go at once (the sender's pool frees it when Send returns)
  // Keeps it until this rank's next Send (over the compute between), as StagedTransport and
  // NcclTransport keep theirs until a copy or the peer is done: handed off
  // (kernels::Tensor::HandOffToTransport) as those transports do, or not (what they did before,
  // for the test that shows the difference).
  kHeldHandedOff,
  kHeldNotHandedOff,
};

// One rank's end of the mailbox.
class PoolTransport final : public Transport {
 public:
  PoolTransport(int rank, CudaDevice* device, Mailbox* mailbox, SentTensors sent = SentTensors::kReleased)
      : rank_(rank), device_(device), mailbox_(mailbox), sent_tensors_(sent) {}

  Status Send(int peer, const MessageTag& tag, kernels::Tensor data) override {
    if (data.on_host()) {  // the executor's host collectives (the gradient norm): passed as bytes
      std::vector<char> bytes(data.bytes());
      std::memcpy(bytes.data(), data.data(), bytes.size());
      sent_ += bytes.size();
      mailbox_->Put(rank_, peer, tag, std::move(bytes), /*host=*/true);
      return Status::Ok();
    }
    if (data.memory() != kernels::MemoryKind::kCuda || data.device() != device_->index()) {
      return FailedPrecondition("PoolTransport: sends tensors of CUDA device " + std::to_string(device_->index()) +
                                " only, got " + kernels::ToString(data.spec()));
    }
    held_ = kernels::Tensor();  // the previous send's tensor, if held
    if (sent_tensors_ == SentTensors::kHeldHandedOff) PIPECOORD_RETURN_IF_ERROR(data.HandOffToTransport());
    std::vector<char> bytes(data.bytes());
    if (!bytes.empty()) PIPECOORD_RETURN_IF_ERROR(device_->Download(data, bytes.data()));
    sent_ += bytes.size();
    mailbox_->Put(rank_, peer, tag, std::move(bytes));
    if (sent_tensors_ != SentTensors::kReleased) held_ = std::move(data);
    return Status::Ok();
  }

  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec& expected,
                               std::chrono::milliseconds timeout) override {
    auto message = mailbox_->Take(peer, rank_, tag, timeout);
    if (!message.ok()) return message.status();
    std::vector<char>* bytes = &message->bytes;
    if (bytes->size() != expected.bytes()) {
      return Internal("PoolTransport: " + ToString(tag) + " from rank " + std::to_string(peer) + " has " +
                      std::to_string(bytes->size()) + " bytes, expected " + kernels::ToString(expected));
    }
    received_ += bytes->size();
    if (message->host) {
      auto t = kernels::Tensor::Empty(kernels::HostAllocator(), expected);
      if (!t.ok()) return t.status();
      std::memcpy(t->data(), bytes->data(), bytes->size());
      return t;
    }
    auto t = device_->Empty(expected);
    if (!t.ok()) return t.status();
    if (!bytes->empty()) PIPECOORD_RETURN_IF_ERROR(device_->Upload(bytes->data(), *t));
    return t;
  }

  Status Flush(std::chrono::milliseconds) override {  // Send delivered already
    held_ = kernels::Tensor();
    return Status::Ok();
  }
  void Shutdown() override { mailbox_->Shutdown(); }
  std::vector<int> BrokenPeers() const override { return {}; }
  uint64_t bytes_sent() const override { return sent_; }
  uint64_t bytes_received() const override { return received_; }

 private:
  const int rank_;
  CudaDevice* device_;
  Mailbox* mailbox_;
  const SentTensors sent_tensors_;
  kernels::Tensor held_;  // one executor thread per rank calls Send and Recv
  std::atomic<uint64_t> sent_{0}, received_{0};
};

}  // namespace pipecoord::worker::cuda

#endif  // PIPECOORD_WORKER_CUDA_POOL_TRANSPORT_FOR_TESTS_H_
