#include "data/rank_checkpoint.h"

#include <charconv>
#include <cstdio>

namespace pipecoord::data {
namespace {

const std::string* Meta(const SafetensorsLayout& layout, std::string_view key) {
  for (const auto& [k, v] : layout.metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool ParseI64(const std::string* text, int64_t* out) {
  if (text == nullptr || text->empty()) return false;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), *out);
  return ec == std::errc() && end == text->data() + text->size() && *out >= 0;
}

std::string Path(const std::string& dir, const std::string& job_id, int rank, int64_t step, const char* ext) {
  return dir + "/" + job_id + "/rank-" + std::to_string(rank) + "/step-" + std::to_string(step) + ext;
}

}  // namespace

std::string RankCheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step) {
  return Path(dir, job_id, global_rank, step, ".safetensors");
}

std::string LegacyRankCheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step) {
  return Path(dir, job_id, global_rank, step, ".ckpt");
}

uint64_t Fnv1a64(std::span<const uint8_t> bytes, uint64_t hash) {
  for (uint8_t c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

std::vector<std::pair<std::string, std::string>> RankCheckpointMetadata(const RankCheckpointInfo& info,
                                                                        uint64_t fnv1a64) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64));
  return {{"format", kRankCheckpointFormat},
          {"version", "1"},
          {"step", std::to_string(info.step)},
          {"optimizer_steps", std::to_string(info.optimizer_steps)},
          {"fnv1a64", hex}};
}

Result<RankCheckpointInfo> CheckRankCheckpoint(const SafetensorsLayout& layout, std::span<const uint8_t> file) {
  const std::string* format = Meta(layout, "format");
  const std::string* version = Meta(layout, "version");
  if (format == nullptr || *format != kRankCheckpointFormat || version == nullptr || *version != "1") {
    return InvalidArgument(std::string("not a pipecoord rank checkpoint (its __metadata__ needs format \"") +
                           kRankCheckpointFormat + "\", version \"1\")");
  }
  RankCheckpointInfo info;
  if (!ParseI64(Meta(layout, "step"), &info.step) || !ParseI64(Meta(layout, "optimizer_steps"), &info.optimizer_steps)) {
    return InvalidArgument("not a pipecoord rank checkpoint (__metadata__ step and optimizer_steps must be integers >= 0)");
  }
  const std::string* stored = Meta(layout, "fnv1a64");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(Fnv1a64(file.subspan(layout.data_start, layout.data_size))));
  if (stored == nullptr || *stored != hex) return InvalidArgument("checksum mismatch: the file is corrupt");
  return info;
}

Result<std::pair<std::string, int64_t>> SplitShardName(std::string_view name) {
  const size_t at = name.rfind('@');
  if (at == std::string_view::npos) return std::pair{std::string(name), int64_t{0}};
  const std::string_view digits = name.substr(at + 1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return InvalidArgument("tensor \"" + std::string(name) + "\": not NAME@FIRST_ELEMENT");
  }
  int64_t first = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), first);
  return std::pair{std::string(name.substr(0, at)), first};
}

}  // namespace pipecoord::data
