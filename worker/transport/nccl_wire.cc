#include "worker/transport/nccl_wire.h"

#include <cctype>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace pipecoord::worker::nccl_wire {
namespace {

constexpr uint32_t kHeaderMagic = 0x48434E50u;  // "PNCH" little-endian
constexpr uint16_t kHeaderVersion = 1;
constexpr const char* kCardFirstLine = "pipecoord-nccl-card v1";

// Offsets of the header's fields (little-endian).
constexpr size_t kMagicAt = 0;    // u32
constexpr size_t kVersionAt = 4;  // u16
constexpr size_t kDTypeAt = 6;    // u8
constexpr size_t kNDimAt = 7;     // u8
constexpr size_t kChannelAt = 8;  // u32
constexpr size_t kStageAt = 12;   // i32
constexpr size_t kMbAt = 16;      // i32
constexpr size_t kStepAt = 20;    // i32
constexpr size_t kBytesAt = 24;   // u64
constexpr size_t kDimsAt = 32;    // 4 x i64
static_assert(kDimsAt + 8 * kMaxHeaderDims == kHeaderBytes);

template <typename T>
void Put(HeaderBytes& out, size_t at, T value) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) out[at + i] = static_cast<uint8_t>(u >> (8 * i));
}

template <typename T>
T Get(std::span<const uint8_t> in, size_t at) {
  using U = std::make_unsigned_t<T>;
  U u = 0;
  for (size_t i = 0; i < sizeof(T); ++i) u |= static_cast<U>(static_cast<U>(in[at + i]) << (8 * i));
  return static_cast<T>(u);
}

std::string Hex(const std::string& raw) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Unhex(const std::string& hex, std::string* raw) {
  if (hex.size() % 2 != 0) return false;
  raw->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexDigit(hex[i]);
    const int lo = HexDigit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *raw += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "1a2b3c4d-..." as nvidia-smi prints a UUID, from its 16 raw bytes.
std::string UuidText(const std::string& raw) {
  if (raw.size() != 16) return Hex(raw);
  const std::string h = Hex(raw);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" + h.substr(20);
}

}  // namespace

MessageHeader HeaderFor(const MessageTag& tag, const kernels::TensorSpec& spec) {
  MessageHeader h;
  h.tag = tag;
  h.bytes = spec.bytes();
  if (spec.shape.size() <= kMaxHeaderDims) {
    h.spec = spec;
  } else {
    h.spec = {kernels::DType::kU8, {static_cast<int64_t>(h.bytes)}};
  }
  return h;
}

HeaderBytes EncodeHeader(const MessageHeader& header) {
  HeaderBytes out{};
  Put<uint32_t>(out, kMagicAt, kHeaderMagic);
  Put<uint16_t>(out, kVersionAt, kHeaderVersion);
  Put<uint8_t>(out, kDTypeAt, static_cast<uint8_t>(header.spec.dtype));
  Put<uint8_t>(out, kNDimAt, static_cast<uint8_t>(header.spec.shape.size()));
  Put<uint32_t>(out, kChannelAt, header.tag.channel);
  Put<int32_t>(out, kStageAt, header.tag.stage);
  Put<int32_t>(out, kMbAt, header.tag.mb);
  Put<int32_t>(out, kStepAt, header.tag.step);
  Put<uint64_t>(out, kBytesAt, header.bytes);
  for (size_t i = 0; i < header.spec.shape.size() && i < kMaxHeaderDims; ++i) {
    Put<int64_t>(out, kDimsAt + 8 * i, header.spec.shape[i]);
  }
  return out;
}

Result<MessageHeader> DecodeHeader(std::span<const uint8_t> in) {
  if (in.size() != kHeaderBytes) {
    return Internal("message header: expected " + std::to_string(kHeaderBytes) + " bytes, got " +
                    std::to_string(in.size()));
  }
  const uint32_t magic = Get<uint32_t>(in, kMagicAt);
  if (magic != kHeaderMagic) {
    std::ostringstream s;
    s << "message header: bad magic 0x" << std::hex << magic << " (expected 0x" << kHeaderMagic
      << "): the link lost its place in the stream, or the peer is not a pipecoord NCCL transport";
    return Internal(s.str());
  }
  const uint16_t version = Get<uint16_t>(in, kVersionAt);
  if (version != kHeaderVersion) {
    return Internal("message header: version " + std::to_string(version) + ", this build speaks " +
                    std::to_string(kHeaderVersion) + " (the ranks run different builds)");
  }
  const uint8_t dtype = Get<uint8_t>(in, kDTypeAt);
  if (dtype > static_cast<uint8_t>(kernels::DType::kU8)) {
    return Internal("message header: unknown dtype " + std::to_string(dtype));
  }
  const uint8_t ndim = Get<uint8_t>(in, kNDimAt);
  if (ndim > kMaxHeaderDims) {
    return Internal("message header: " + std::to_string(ndim) + " dimensions, at most " +
                    std::to_string(kMaxHeaderDims) + " travel in a header");
  }
  MessageHeader h;
  h.tag.channel = Get<uint32_t>(in, kChannelAt);
  h.tag.stage = Get<int32_t>(in, kStageAt);
  h.tag.mb = Get<int32_t>(in, kMbAt);
  h.tag.step = Get<int32_t>(in, kStepAt);
  h.bytes = Get<uint64_t>(in, kBytesAt);
  h.spec.dtype = static_cast<kernels::DType>(dtype);
  // The element count, checked against overflow, must give exactly the announced bytes.
  const uint64_t limit = std::numeric_limits<int64_t>::max() / 8;
  uint64_t numel = 1;
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t d = Get<int64_t>(in, kDimsAt + 8 * i);
    if (d < 0 || static_cast<uint64_t>(d) > limit) {
      return Internal("message header: dimension " + std::to_string(i) + " is " + std::to_string(d));
    }
    h.spec.shape.push_back(d);
    numel = d == 0 ? 0 : (numel > limit / static_cast<uint64_t>(d) ? limit + 1 : numel * static_cast<uint64_t>(d));
  }
  if (numel > limit || numel * kernels::DTypeBytes(h.spec.dtype) != h.bytes) {
    return Internal("message header: " + kernels::ToString(h.spec) + " does not have the announced " +
                    std::to_string(h.bytes) + " bytes");
  }
  return h;
}

bool SameDevice(const DeviceIdentity& a, const DeviceIdentity& b) {
  if (!a.uuid.empty() && a.uuid == b.uuid) return true;
  return !a.host.empty() && a.host == b.host && !a.pci_bus_id.empty() && Lower(a.pci_bus_id) == Lower(b.pci_bus_id);
}

std::string Describe(const DeviceIdentity& d) {
  return "cuda:" + std::to_string(d.device) + " GPU-" + UuidText(d.uuid) + " (PCI " + d.pci_bus_id + ") on host " +
         d.host;
}

std::string EncodeCard(const PairCard& card) {
  std::string s = std::string(kCardFirstLine) + "\n";
  s += "host=" + Hex(card.device.host) + "\n";
  s += "pci=" + Hex(card.device.pci_bus_id) + "\n";
  s += "uuid=" + Hex(card.device.uuid) + "\n";
  s += "device=" + std::to_string(card.device.device) + "\n";
  s += "low_to_high=" + Hex(card.low_to_high_id) + "\n";
  s += "high_to_low=" + Hex(card.high_to_low_id) + "\n";
  return s;
}

Result<PairCard> DecodeCard(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kCardFirstLine) {
    return Internal("rendezvous card: does not start with \"" + std::string(kCardFirstLine) +
                    "\" (a peer of another build, or a value that is not a card)");
  }
  std::map<std::string, std::string> fields;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return Internal("rendezvous card: line without '=': \"" + line + "\"");
    fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  PairCard card;
  struct HexField {
    const char* name;
    std::string* out;
  };
  for (const HexField& f : {HexField{"host", &card.device.host}, HexField{"pci", &card.device.pci_bus_id},
                            HexField{"uuid", &card.device.uuid}, HexField{"low_to_high", &card.low_to_high_id},
                            HexField{"high_to_low", &card.high_to_low_id}}) {
    auto it = fields.find(f.name);
    if (it == fields.end()) return Internal(std::string("rendezvous card: no field \"") + f.name + "\"");
    if (!Unhex(it->second, f.out)) return Internal(std::string("rendezvous card: field \"") + f.name + "\" is not hex");
  }
  auto dev = fields.find("device");
  if (dev == fields.end()) return Internal("rendezvous card: no field \"device\"");
  try {
    size_t used = 0;
    card.device.device = std::stoi(dev->second, &used);
    if (used != dev->second.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    return Internal("rendezvous card: field \"device\" is not an integer: \"" + dev->second + "\"");
  }
  return card;
}

std::string CardKey(uint64_t session, int low, int high, int from) {
  return "pipecoord/nccl/session-" + std::to_string(session) + "/pair-" + std::to_string(low) + "-" +
         std::to_string(high) + "/rank-" + std::to_string(from);
}

std::string IdsKey(uint64_t session, int low, int high) {
  return "pipecoord/nccl/session-" + std::to_string(session) + "/pair-" + std::to_string(low) + "-" +
         std::to_string(high) + "/ids";
}

}  // namespace pipecoord::worker::nccl_wire
