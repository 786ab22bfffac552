// Frame: the TCP transport's wire format.
//
// Every frame is a fixed 40-byte header, then `payload_bytes` bytes of payload. Header fields
// are little-endian, at these offsets:
//
//   0  u32 magic          the bytes "PCTF" (0x46544350 read as little-endian)
//   4  u16 version        kFrameVersion; a peer speaking another version is refused
//   6  u16 kind           FrameKind
//   8  u64 session        the job's session id (a stale connection from another job differs)
//  16  u32 channel        MessageTag::channel      (REFUSE: the RefuseReason)
//  20  i32 stage          MessageTag::stage        (HELLO/ACCEPT/REFUSE: the sender's rank)
//  24  i32 mb             MessageTag::mb           (HELLO/ACCEPT: the rank the sender talks to)
//  28  i32 step           MessageTag::step
//  32  u64 payload_bytes  DATA: at most the receiver's limit; others: 0
//
// A DATA payload is one tensor's bytes in its dtype's little-endian layout (f32: IEEE-754
// binary32; bf16: the upper half of a binary32), which is the native layout of every host we
// build for (static_asserts in frame.cc), so payloads go to and from the socket without
// conversion. The frame does not carry the dtype or shape: the receiver names the spec it
// expects and the byte count must match it (version 2; version 1 carried f32 only).
//
// Handshake: the dialling side sends HELLO {session, stage = its rank, mb = the rank it
// expects to reach}; the accepting side answers ACCEPT {its session, stage = its rank,
// mb = the dialler's rank} or REFUSE {its session, channel = reason, stage = its rank} and
// closes. After ACCEPT both sides send only DATA frames.
#ifndef PIPECOORD_WORKER_TRANSPORT_FRAME_H_
#define PIPECOORD_WORKER_TRANSPORT_FRAME_H_

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

inline constexpr size_t kFrameHeaderBytes = 40;
inline constexpr uint32_t kFrameMagic = 0x46544350;  // "PCTF"
inline constexpr uint16_t kFrameVersion = 2;

enum class FrameKind : uint16_t {
  kData = 1,
  kHello = 2,
  kAccept = 3,
  kRefuse = 4,
};

enum class RefuseReason : uint32_t {
  kSessionMismatch = 1,  // the dialler belongs to another job (or an older run of this one)
  kWrongRank = 2,        // the dialler expected another rank at this endpoint
  kUnexpectedRank = 3,   // the dialler is not a peer that should dial us
  kDuplicateRank = 4,    // that rank is connected already
  kShuttingDown = 5,
};

const char* RefuseReasonName(uint32_t reason);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kFrameVersion;
  uint16_t kind = static_cast<uint16_t>(FrameKind::kData);
  uint64_t session = 0;
  MessageTag tag;
  uint64_t payload_bytes = 0;
};

using HeaderBytes = std::array<uint8_t, kFrameHeaderBytes>;

HeaderBytes EncodeHeader(const FrameHeader& header);
// Decodes the fields as they are; ValidateHeader judges them.
FrameHeader DecodeHeader(const HeaderBytes& bytes);

// Checks magic, version and kind, and the payload length: DATA payloads at most
// `max_payload_bytes`, handshake frames none. Does not check the session. The
// message names the field and the values ("payload of 1099511627776 bytes exceeds the limit of
// 1073741824 bytes").
Status ValidateHeader(const FrameHeader& header, uint64_t max_payload_bytes);

// Handshake frames.
FrameHeader HelloFrame(uint64_t session, int32_t my_rank, int32_t peer_rank);
FrameHeader AcceptFrame(uint64_t session, int32_t my_rank, int32_t peer_rank);
FrameHeader RefuseFrame(uint64_t session, int32_t my_rank, RefuseReason reason);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_FRAME_H_
