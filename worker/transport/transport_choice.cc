#include "worker/transport/transport_choice.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kFirstLine = "pipecoord-transport-card v1";
// Everything after this line is the rank's GPU as nccl_wire encodes it (EncodeCard).
constexpr const char* kDeviceLine = "device-card:";

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

bool Unhex(const std::string& hex, std::string* out) {
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

bool ParseInt(const std::string& text, int* out) {
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used != text.size()) return false;
    *out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// "GPU-5a1b2c3d-...-...(PCI 0000:65:00.0)", as nvidia-smi names GPUs; by bus and host without a UUID.
std::string GpuName(const nccl_wire::DeviceIdentity& d) {
  if (d.uuid.size() == 16) {
    const std::string h = Hex(d.uuid);
    return "GPU-" + h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
           h.substr(20) + " (PCI " + d.pci_bus_id + ")";
  }
  return "the GPU at PCI " + d.pci_bus_id + " on host " + d.host;
}

}  // namespace

std::string RankCardKey(uint64_t session, int rank) {
  return "pipecoord/transport/session-" + std::to_string(session) + "/rank-" + std::to_string(rank);
}

std::string EncodeRankCard(const RankCard& card) {
  std::string s = std::string(kFirstLine) + "\n";
  s += "rank=" + std::to_string(card.rank) + "\n";
  s += "peers=";
  for (size_t i = 0; i < card.peers.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(card.peers[i]);
  s += "\n";
  s += "problem=" + Hex(card.problem) + "\n";
  if (card.device.has_value()) {
    nccl_wire::PairCard device;
    device.device = *card.device;
    s += std::string(kDeviceLine) + "\n" + nccl_wire::EncodeCard(device);
  }
  return s;
}

Result<RankCard> DecodeRankCard(const std::string& text) {
  const auto bad = [](const std::string& why) { return Internal("transport card: " + why); };
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kFirstLine) {
    return bad("does not start with \"" + std::string(kFirstLine) + "\" (a rank of another build, or a value that "
               "is not a card)");
  }
  std::map<std::string, std::string> fields;
  bool has_device = false;
  while (std::getline(in, line)) {
    if (line == kDeviceLine) {
      has_device = true;
      break;
    }
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return bad("line without '=': \"" + line + "\"");
    fields[line.substr(0, eq)] = line.substr(eq + 1);
  }
  RankCard card;
  for (const char* name : {"rank", "peers", "problem"}) {
    if (fields.count(name) == 0) return bad(std::string("no field \"") + name + "\"");
  }
  if (!ParseInt(fields["rank"], &card.rank) || card.rank < 0) return bad("rank \"" + fields["rank"] + "\"");
  std::istringstream peers(fields["peers"]);
  std::string peer;
  while (std::getline(peers, peer, ',')) {
    int p = -1;
    if (!ParseInt(peer, &p) || p < 0) return bad("peer \"" + peer + "\" in \"" + fields["peers"] + "\"");
    card.peers.push_back(p);
  }
  if (!Unhex(fields["problem"], &card.problem)) return bad("field \"problem\" is not hex");
  if (has_device) {
    std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto device = nccl_wire::DecodeCard(rest);
    if (!device.ok()) return bad("its GPU: " + device.status().message());
    card.device = device->device;
  }
  if (card.device.has_value() == !card.problem.empty()) {
    return bad(card.device.has_value() ? "names a GPU and a problem" : "names neither a GPU nor a problem");
  }
  return card;
}

TransportChoice ChooseTransport(const std::vector<RankCard>& cards) {
  constexpr const char* kStaged = "boundary tensors staged through the host";
  std::map<int, const RankCard*> by_rank;
  for (const RankCard& c : cards) by_rank[c.rank] = &c;
  for (const auto& [rank, card] : by_rank) {
    if (!card->device.has_value()) {
      return {false, "rank " + std::to_string(rank) + " could not name its GPU (" + card->problem +
                         "): NCCL needs every GPU named; " + kStaged};
    }
  }
  std::set<std::pair<int, int>> pairs;
  for (const auto& [rank, card] : by_rank) {
    for (int p : card->peers) {
      if (p != rank) pairs.insert({std::min(rank, p), std::max(rank, p)});
    }
  }
  for (const auto& [a, b] : pairs) {
    const int missing = by_rank.count(a) == 0 ? a : (by_rank.count(b) == 0 ? b : -1);
    if (missing >= 0) {
      return {false, "rank " + std::to_string(missing) + " exchanges tensors but published no card: " + kStaged};
    }
  }
  if (pairs.empty()) return {false, "no two ranks exchange tensors: nothing travels between ranks (staged, unused)"};
  std::vector<std::pair<int, int>> shared;
  for (const auto& [a, b] : pairs) {
    if (nccl_wire::SameDevice(*by_rank[a]->device, *by_rank[b]->device)) shared.push_back({a, b});
  }
  if (!shared.empty()) {
    const auto [a, b] = shared.front();
    std::string why = "ranks " + std::to_string(a) + " and " + std::to_string(b) + " share " +
                      GpuName(*by_rank[a]->device);
    if (shared.size() > 1) why += " (" + std::to_string(shared.size()) + " pairs that exchange tensors share a GPU)";
    return {false, why + ": NCCL refuses two ranks on one device; " + kStaged};
  }
  for (auto i = by_rank.begin(); i != by_rank.end(); ++i) {
    for (auto j = std::next(i); j != by_rank.end(); ++j) {
      if (nccl_wire::SameDevice(*i->second->device, *j->second->device)) {
        return {true, "no two ranks that exchange tensors share a GPU (ranks " + std::to_string(i->first) + " and " +
                          std::to_string(j->first) + " share one but exchange nothing): NCCL"};
      }
    }
  }
  return {true, "every rank on its own GPU: NCCL"};
}

Result<std::vector<RankCard>> ExchangeRankCards(const RankCard& mine, int world, uint64_t session,
                                                const RendezvousFn& rendezvous, std::chrono::milliseconds timeout) {
  if (world < 1 || mine.rank < 0 || mine.rank >= world) {
    return InvalidArgument("ExchangeRankCards: rank " + std::to_string(mine.rank) + " is not in 0.." +
                           std::to_string(world - 1));
  }
  if (!rendezvous) return InvalidArgument("ExchangeRankCards: no rendezvous function");
  const Clock::time_point deadline = Clock::now() + timeout;
  const std::string my_key = RankCardKey(session, mine.rank);
  auto published = rendezvous(my_key, EncodeRankCard(mine));
  if (!published.ok()) {
    return Status(published.status().code(), "publishing " + my_key + ": " + published.status().message());
  }
  std::vector<RankCard> cards;
  cards.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const std::string key = RankCardKey(session, r);
    auto value = rendezvous(key, "");
    if (!value.ok()) return Status(value.status().code(), "waiting for " + key + ": " + value.status().message());
    auto card = DecodeRankCard(*value);
    if (!card.ok()) return Status(card.status().code(), key + ": " + card.status().message());
    if (card->rank != r) return Internal(key + ": the card is rank " + std::to_string(card->rank) + "'s");
    cards.push_back(std::move(*card));
    if (r + 1 < world && Clock::now() >= deadline) {
      return Unavailable("ExchangeRankCards: timed out after " + std::to_string(timeout.count()) +
                         " ms with the cards of ranks 0.." + std::to_string(r) + " of " + std::to_string(world));
    }
  }
  return cards;
}

}  // namespace pipecoord::worker
