#include "worker/transport/frame.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace pipecoord::worker {

// Payload tensors are written and read as raw memory: that is the wire's little-endian layout
// only on such hosts.
static_assert(std::endian::native == std::endian::little,
              "the TCP transport sends floats in native layout: port it to big-endian hosts");
static_assert(std::numeric_limits<float>::is_iec559 && sizeof(float) == 4,
              "the TCP transport assumes IEEE-754 binary32 floats");

namespace {

template <typename T>
void Put(HeaderBytes& b, size_t offset, T value) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) b[offset + i] = static_cast<uint8_t>(u >> (8 * i));
}

template <typename T>
T Get(const HeaderBytes& b, size_t offset) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>(u | (static_cast<U>(b[offset + i]) << (8 * i)));
  return static_cast<T>(u);
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const char* RefuseReasonName(uint32_t reason) {
  switch (static_cast<RefuseReason>(reason)) {
    case RefuseReason::kSessionMismatch: return "session mismatch";
    case RefuseReason::kWrongRank: return "wrong rank";
    case RefuseReason::kUnexpectedRank: return "unexpected rank";
    case RefuseReason::kDuplicateRank: return "duplicate rank";
    case RefuseReason::kShuttingDown: return "shutting down";
  }
  return "unknown reason";
}

HeaderBytes EncodeHeader(const FrameHeader& h) {
  HeaderBytes b{};
  Put<uint32_t>(b, 0, h.magic);
  Put<uint16_t>(b, 4, h.version);
  Put<uint16_t>(b, 6, h.kind);
  Put<uint64_t>(b, 8, h.session);
  Put<uint32_t>(b, 16, h.tag.channel);
  Put<int32_t>(b, 20, h.tag.stage);
  Put<int32_t>(b, 24, h.tag.mb);
  Put<int32_t>(b, 28, h.tag.step);
  Put<uint64_t>(b, 32, h.payload_bytes);
  return b;
}

FrameHeader DecodeHeader(const HeaderBytes& b) {
  FrameHeader h;
  h.magic = Get<uint32_t>(b, 0);
  h.version = Get<uint16_t>(b, 4);
  h.kind = Get<uint16_t>(b, 6);
  h.session = Get<uint64_t>(b, 8);
  h.tag.channel = Get<uint32_t>(b, 16);
  h.tag.stage = Get<int32_t>(b, 20);
  h.tag.mb = Get<int32_t>(b, 24);
  h.tag.step = Get<int32_t>(b, 28);
  h.payload_bytes = Get<uint64_t>(b, 32);
  return h;
}

Status ValidateHeader(const FrameHeader& h, uint64_t max_payload_bytes) {
  if (h.magic != kFrameMagic) {
    return InvalidArgument("bad magic " + Hex(h.magic) + " (expected " + Hex(kFrameMagic) +
                           "): not a pipecoord transport frame");
  }
  if (h.version != kFrameVersion) {
    return InvalidArgument("unsupported frame version " + std::to_string(h.version) +
                           " (this build speaks version " + std::to_string(kFrameVersion) + ")");
  }
  if (h.kind < static_cast<uint16_t>(FrameKind::kData) ||
      h.kind > static_cast<uint16_t>(FrameKind::kRefuse)) {
    return InvalidArgument("unknown frame kind " + std::to_string(h.kind));
  }
  if (h.kind != static_cast<uint16_t>(FrameKind::kData)) {
    if (h.payload_bytes != 0) {
      return InvalidArgument("handshake frame (kind " + std::to_string(h.kind) + ") carries a " +
                             std::to_string(h.payload_bytes) + "-byte payload, expected none");
    }
    return Status::Ok();
  }
  if (h.payload_bytes > max_payload_bytes) {
    return InvalidArgument("payload of " + std::to_string(h.payload_bytes) +
                           " bytes exceeds the limit of " + std::to_string(max_payload_bytes) +
                           " bytes (oversized frame)");
  }
  return Status::Ok();
}

FrameHeader HelloFrame(uint64_t session, int32_t my_rank, int32_t peer_rank) {
  FrameHeader h;
  h.kind = static_cast<uint16_t>(FrameKind::kHello);
  h.session = session;
  h.tag.stage = my_rank;
  h.tag.mb = peer_rank;
  return h;
}

FrameHeader AcceptFrame(uint64_t session, int32_t my_rank, int32_t peer_rank) {
  FrameHeader h;
  h.kind = static_cast<uint16_t>(FrameKind::kAccept);
  h.session = session;
  h.tag.stage = my_rank;
  h.tag.mb = peer_rank;
  return h;
}

FrameHeader RefuseFrame(uint64_t session, int32_t my_rank, RefuseReason reason) {
  FrameHeader h;
  h.kind = static_cast<uint16_t>(FrameKind::kRefuse);
  h.session = session;
  h.tag.channel = static_cast<uint32_t>(reason);
  h.tag.stage = my_rank;
  return h;
}

}  // namespace pipecoord::worker
