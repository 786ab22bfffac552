// What the NCCL transport (nccl_transport.h) exchanges besides tensor bytes, as pure functions
// tested without a GPU:
//
// - The message header: 64 bytes sent over NCCL before each payload, naming the tag and the
//   sender's spec, so that the receiver can take messages off the link in the order they were
//   sent and still hand them out in any tag order (Transport's contract).
// - The rendezvous card: what each rank of a pair publishes before any communicator exists. It
//   names the rank's GPU (so that a pair on one GPU is refused before NCCL hangs or fails on it)
//   and, from the lower rank, the NCCL unique ids of the pair's two communicators.
#ifndef PIPECOORD_WORKER_TRANSPORT_NCCL_WIRE_H_
#define PIPECOORD_WORKER_TRANSPORT_NCCL_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "kernels/tensor.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker::nccl_wire {

// ---- Message header ----

inline constexpr size_t kHeaderBytes = 64;
// Shapes of more dimensions travel as u8[bytes] (the receiver views the bytes as it expects).
inline constexpr size_t kMaxHeaderDims = 4;
// The tag of the header each direction of a pair exchanges once in Connect (no payload).
inline constexpr uint32_t kHelloChannel = 0xFFFFFFFFu;

struct MessageHeader {
  MessageTag tag;
  kernels::TensorSpec spec;  // what the sender sent; spec.bytes() == bytes
  uint64_t bytes = 0;
  friend bool operator==(const MessageHeader&, const MessageHeader&) = default;
};

using HeaderBytes = std::array<uint8_t, kHeaderBytes>;

// A header for `tag` announcing `spec` (u8[bytes] when the shape has more than 4 dimensions).
MessageHeader HeaderFor(const MessageTag& tag, const kernels::TensorSpec& spec);
HeaderBytes EncodeHeader(const MessageHeader& header);
// INTERNAL naming the field when the bytes are not a header of this version (the two ranks run
// different builds, or the link lost its place in the stream).
Result<MessageHeader> DecodeHeader(std::span<const uint8_t> bytes);

// ---- Rendezvous card ----

// Which GPU a rank drives, as NCCL tells GPUs apart: NCCL refuses two ranks of a communicator
// whose host hash and PCI bus id are equal ("Duplicate GPU detected", ncclInvalidUsage).
struct DeviceIdentity {
  std::string host;        // NCCL_HOSTID if set, else hostname + boot id (NCCL's host hash input)
  std::string pci_bus_id;  // "0000:65:00.0"
  std::string uuid;        // the GPU's (or MIG instance's) 16 UUID bytes, raw
  int device = -1;         // the CUDA device index in that process (for messages only)
  friend bool operator==(const DeviceIdentity&, const DeviceIdentity&) = default;
};

// True when NCCL would see one GPU twice: the same UUID, or the same host and PCI bus id.
bool SameDevice(const DeviceIdentity& a, const DeviceIdentity& b);
// "cuda:0 GPU-1a2b3c4d-... (PCI 0000:65:00.0) on host gpu-node-7"
std::string Describe(const DeviceIdentity& d);

struct PairCard {
  DeviceIdentity device;
  // In the lower rank's ids card only: the unique ids (NCCL_UNIQUE_ID_BYTES raw bytes each) of the
  // communicator carrying lower -> higher and the one carrying higher -> lower.
  std::string low_to_high_id;
  std::string high_to_low_id;
  friend bool operator==(const PairCard&, const PairCard&) = default;
};

std::string EncodeCard(const PairCard& card);
// INTERNAL naming what is wrong (a peer of another build, or a value that is not a card).
Result<PairCard> DecodeCard(const std::string& text);

// The rendezvous key under which `from` (one of the pair low < high) publishes its card, which
// names its device: "pipecoord/nccl/session-<session>/pair-<low>-<high>/rank-<from>".
std::string CardKey(uint64_t session, int low, int high, int from);
// The key under which the lower rank publishes the card with the pair's unique ids, once both
// cards showed two different GPUs: "pipecoord/nccl/session-<session>/pair-<low>-<high>/ids".
std::string IdsKey(uint64_t session, int low, int high);

}  // namespace pipecoord::worker::nccl_wire

#endif  // PIPECOORD_WORKER_TRANSPORT_NCCL_WIRE_H_
