#include "worker/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "data/rank_checkpoint.h"
#include "data/safetensors_format.h"

namespace pipecoord::worker {
namespace {

constexpr char kMagic[8] = {'P', 'C', 'C', 'K', 'P', 'T', '0', '1'};
constexpr uint32_t kMaxName = 4096;

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

uint64_t Fnv1a(std::string_view bytes, uint64_t h = kFnvOffset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Reads fixed-size fields off the front of a buffer; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  template <typename T>
  bool Get(T* v) {
    if (b_.size() < sizeof(T)) return false;
    std::memcpy(v, b_.data(), sizeof(T));
    b_.remove_prefix(sizeof(T));
    return true;
  }
  bool Bytes(size_t n, std::string_view* out) {
    if (b_.size() < n) return false;
    *out = b_.substr(0, n);
    b_.remove_prefix(n);
    return true;
  }
  size_t left() const { return b_.size(); }

 private:
  std::string_view b_;
};

std::string Errno() { return std::strerror(errno); }

// A checkpoint file's bytes, read once; NOT_FOUND asks whether --checkpoint-dir is shared with
// `writer`.
Result<std::string> ReadWhole(const std::string& path, const std::string& writer) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return NotFound("checkpoint " + path + ": not found (is --checkpoint-dir shared with " + writer + "?)");
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return Unavailable("checkpoint " + path + ": read failed");
  return bytes;
}

}  // namespace

static Result<CheckpointInfo> DecodeLegacyInto(std::string_view bytes, const std::vector<StateTensor>& tensors) {
  if (bytes.size() < sizeof kMagic + 8 + 8 + 4 + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return InvalidArgument("not a pipecoord checkpoint (bad magic or too short: " + std::to_string(bytes.size()) + " bytes)");
  }
  uint64_t stored_hash;
  std::memcpy(&stored_hash, bytes.data() + bytes.size() - 8, 8);
  const std::string_view body = bytes.substr(0, bytes.size() - 8);
  if (Fnv1a(body) != stored_hash) return InvalidArgument("checksum mismatch: the file is truncated or corrupt");
  Reader r(body.substr(sizeof kMagic));
  uint64_t step, opt_steps;
  uint32_t count;
  if (!r.Get(&step) || !r.Get(&opt_steps) || !r.Get(&count)) return InvalidArgument("truncated header");
  std::map<std::string_view, const StateTensor*> want;
  for (const StateTensor& t : tensors) want[t.name] = &t;
  if (count != tensors.size()) {
    return InvalidArgument("holds " + std::to_string(count) + " tensors, this rank has " + std::to_string(tensors.size()) +
                           " (another model or partition?)");
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t name_len;
    std::string_view name, data;
    uint64_t numel;
    if (!r.Get(&name_len) || name_len > kMaxName || !r.Bytes(name_len, &name) || !r.Get(&numel)) {
      return InvalidArgument("tensor " + std::to_string(i) + ": truncated entry");
    }
    auto it = want.find(name);
    if (it == want.end()) return InvalidArgument("tensor \"" + std::string(name) + "\": not held by this rank");
    const StateTensor& t = *it->second;
    if (numel != t.data.size()) {
      return InvalidArgument("tensor \"" + std::string(name) + "\": has " + std::to_string(numel) + " elements, this rank's has " +
                             std::to_string(t.data.size()));
    }
    if (!r.Bytes(numel * sizeof(float), &data)) return InvalidArgument("tensor \"" + std::string(name) + "\": truncated data");
    std::memcpy(t.data.data(), data.data(), data.size());
    want.erase(it);  // each name once
  }
  if (r.left() != 0) return InvalidArgument(std::to_string(r.left()) + " unexpected bytes after the last tensor");
  CheckpointInfo info;
  info.step = static_cast<int64_t>(step);
  info.optimizer_steps = static_cast<int64_t>(opt_steps);
  return info;
}

namespace {

// The tensors as safetensors entries (F32; the given shape, else [elements]), the data buffer's
// FNV-1a in the writer's order, and the file's plan with the metadata that carries it.
struct Planned {
  std::vector<data::TensorToWrite> entries;
  data::SafetensorsPlan plan;
};

Result<Planned> PlanCheckpoint(const CheckpointInfo& info, const std::vector<StateTensor>& tensors) {
  Planned p;
  for (const StateTensor& t : tensors) {
    std::vector<uint64_t> shape;
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      shape.push_back(static_cast<uint64_t>(d));
      n *= static_cast<uint64_t>(d);
    }
    if (t.shape.empty() || n != t.data.size()) shape = {t.data.size()};
    p.entries.push_back({t.name, data::SafetensorsDtype::kF32, std::move(shape),
                         std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(t.data.data()), t.data.size_bytes())});
  }
  auto order = data::PlanSafetensors(p.entries, {});  // the data's order does not depend on metadata
  if (!order.ok()) return order.status();
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i : order->order) hash = data::Fnv1a64(p.entries[i].bytes, hash);
  auto plan = data::PlanSafetensors(p.entries, data::RankCheckpointMetadata({info.step, info.optimizer_steps}, hash));
  if (!plan.ok()) return plan.status();
  p.plan = std::move(plan).value();
  return p;
}

}  // namespace

std::string EncodeCheckpoint(const CheckpointInfo& info, const std::vector<StateTensor>& tensors) {
  auto p = PlanCheckpoint(info, tensors);
  if (!p.ok()) return "";
  std::string out = p->plan.head;
  out.reserve(out.size() + p->plan.data_size);
  for (size_t i : p->plan.order) out.append(reinterpret_cast<const char*>(p->entries[i].bytes.data()), p->entries[i].bytes.size());
  return out;
}

Result<CheckpointInfo> DecodeCheckpointInto(std::string_view bytes, const std::vector<StateTensor>& tensors) {
  if (bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0) {
    return DecodeLegacyInto(bytes, tensors);  // a step-N.ckpt of the format before safetensors
  }
  const std::span<const uint8_t> file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto layout = data::ParseSafetensors(file, "checkpoint");
  if (!layout.ok()) return InvalidArgument("not a pipecoord checkpoint: " + layout.status().message());
  auto info = data::CheckRankCheckpoint(*layout, file);
  if (!info.ok()) return info.status();
  if (layout->tensors.size() != tensors.size()) {
    return InvalidArgument("holds " + std::to_string(layout->tensors.size()) + " tensors, this rank has " +
                           std::to_string(tensors.size()) + " (another model or partition?)");
  }
  std::map<std::string_view, const StateTensor*> want;
  for (const StateTensor& t : tensors) want[t.name] = &t;
  for (const data::SafetensorsTensor& st : layout->tensors) {
    auto it = want.find(st.name);
    if (it == want.end()) return InvalidArgument("tensor \"" + st.name + "\": not held by this rank");
    const StateTensor& t = *it->second;
    if (st.dtype != data::SafetensorsDtype::kF32) {
      return InvalidArgument("tensor \"" + st.name + "\": " + data::DtypeName(st.dtype) + ", a checkpoint holds F32");
    }
    if (st.elements() != t.data.size()) {
      return InvalidArgument("tensor \"" + st.name + "\": has " + std::to_string(st.elements()) +
                             " elements, this rank's has " + std::to_string(t.data.size()));
    }
    std::memcpy(t.data.data(), bytes.data() + layout->data_start + st.begin, st.bytes());
    want.erase(it);
  }
  return CheckpointInfo{info->step, info->optimizer_steps};
}

std::string CheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step) {
  return data::RankCheckpointPath(dir, job_id, global_rank, step);
}

Status WriteCheckpointFile(const std::string& dir, const std::string& job_id, int global_rank, const CheckpointInfo& info,
                           const std::vector<StateTensor>& tensors, int keep, int64_t keep_from) {
  namespace fs = std::filesystem;
  const std::string path = CheckpointPath(dir, job_id, global_rank, info.step);
  const fs::path rank_dir = fs::path(path).parent_path();
  std::error_code ec;
  fs::create_directories(rank_dir, ec);
  if (ec) return Unavailable("checkpoint: cannot create " + rank_dir.string() + ": " + ec.message());
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("checkpoint: cannot write " + tmp + ": " + Errno());
  // Small pieces (header fields, names) are gathered; tensor data goes straight from its buffer.
  std::string why;
  auto write_all = [&](std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = Errno();
        return false;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  };
  auto planned = PlanCheckpoint(info, tensors);
  if (!planned.ok()) {
    ::close(fd);
    return InvalidArgument("checkpoint " + path + ": " + planned.status().message());
  }
  bool written = write_all(planned->plan.head);
  for (size_t i : planned->plan.order) {
    const auto& b = planned->entries[i].bytes;
    written = written && write_all(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
  }
  if (!written) {
    ::close(fd);
    return Unavailable("checkpoint: writing " + tmp + ": " + why);
  }
  // On disk before the rename makes it visible: a crash leaves the old checkpoint or the new one.
  if (::fsync(fd) != 0 || ::close(fd) != 0) return Unavailable("checkpoint: flushing " + tmp + ": " + Errno());
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Unavailable("checkpoint: renaming to " + path + ": " + Errno());
  if (const int dfd = ::open(rank_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);  // the rename itself
    ::close(dfd);
  }
  // Older checkpoints of this rank beyond the newest `keep`, below the steps a restart may need.
  std::vector<int64_t> steps;
  for (const auto& e : fs::directory_iterator(rank_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || (e.path().extension() != ".safetensors" && e.path().extension() != ".ckpt")) continue;
    try {
      steps.push_back(std::stoll(name.substr(5)));
    } catch (...) {
    }
  }
  std::sort(steps.rbegin(), steps.rend());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());  // a step in both formats
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < steps.size(); ++i) {
    if (steps[i] < keep_from) {
      fs::remove(CheckpointPath(dir, job_id, global_rank, steps[i]), ec);
      fs::remove(data::LegacyRankCheckpointPath(dir, job_id, global_rank, steps[i]), ec);  // the older format's
    }
  }
  return Status::Ok();
}

Result<CheckpointInfo> ReadCheckpointFile(const std::string& dir, const std::string& job_id, int global_rank, int64_t step,
                                          const std::vector<StateTensor>& tensors) {
  std::string path = CheckpointPath(dir, job_id, global_rank, step);
  // A step-N.ckpt of the format before safetensors, when that is what the rank left.
  if (const std::string legacy = data::LegacyRankCheckpointPath(dir, job_id, global_rank, step);
      !std::filesystem::exists(path) && std::filesystem::exists(legacy)) {
    path = legacy;
  }
  auto bytes = ReadWhole(path, "the failed worker");
  if (!bytes.ok()) return bytes.status();
  auto info = DecodeCheckpointInto(*bytes, tensors);
  if (!info.ok()) return Status(info.status().code(), "checkpoint " + path + ": " + info.status().message());
  if (info->step != step) {
    return InvalidArgument("checkpoint " + path + ": holds step " + std::to_string(info->step) + ", expected " + std::to_string(step));
  }
  return info;
}

Result<CheckpointFile> CheckpointFile::Read(const std::string& path) {
  auto read = ReadWhole(path, "the workers that wrote it");
  if (!read.ok()) return read.status();
  const std::string& bytes = *read;
  const std::span<const uint8_t> file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  auto layout = data::ParseSafetensors(file, "checkpoint");
  if (!layout.ok()) return InvalidArgument("checkpoint " + path + ": not a pipecoord checkpoint: " + layout.status().message());
  auto info = data::CheckRankCheckpoint(*layout, file);
  if (!info.ok()) return Status(info.status().code(), "checkpoint " + path + ": " + info.status().message());
  CheckpointFile out;
  out.path_ = path;
  out.info_ = {info->step, info->optimizer_steps};
  size_t floats = 0;
  for (const data::SafetensorsTensor& st : layout->tensors) {
    if (st.dtype != data::SafetensorsDtype::kF32) {
      return InvalidArgument("checkpoint " + path + ": tensor \"" + st.name + "\" is " + data::DtypeName(st.dtype) + ", not F32");
    }
    floats += st.elements();
  }
  out.data_.resize(floats);
  size_t at = 0;
  for (const data::SafetensorsTensor& st : layout->tensors) {
    std::memcpy(out.data_.data() + at, bytes.data() + layout->data_start + st.begin, st.bytes());
    out.where_[st.name] = {at, at + st.elements()};
    at += st.elements();
  }
  return out;
}

std::span<const float> CheckpointFile::Find(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return {};
  return std::span<const float>(data_).subspan(it->second.first, it->second.second - it->second.first);
}

std::vector<std::string> CheckpointFile::Names() const {
  std::vector<std::pair<size_t, std::string>> by_offset;
  for (const auto& [name, range] : where_) by_offset.emplace_back(range.first, name);
  std::sort(by_offset.begin(), by_offset.end());
  std::vector<std::string> out;
  for (auto& [at, name] : by_offset) out.push_back(std::move(name));
  return out;
}

Result<CheckpointInfo> ReshardInto(const std::vector<CheckpointFile>& files, const std::vector<StateTensor>& tensors) {
  if (files.empty()) return InvalidArgument("resharding a checkpoint: no files");
  const CheckpointInfo info = files[0].info();
  for (const CheckpointFile& f : files) {
    if (f.info().step != info.step || f.info().optimizer_steps != info.optimizer_steps) {
      return InvalidArgument("resharding a checkpoint: " + f.path() + " holds step " + std::to_string(f.info().step) +
                             " (optimizer step " + std::to_string(f.info().optimizer_steps) + "), " + files[0].path() +
                             " step " + std::to_string(info.step) + " (optimizer step " +
                             std::to_string(info.optimizer_steps) + ")");
    }
  }
  // Every piece of every tensor the files hold: base name -> (first element, elements, whole?).
  struct Piece {
    int64_t from;
    std::span<const float> values;
    bool whole;
  };
  std::map<std::string, std::vector<Piece>> pieces;
  for (const CheckpointFile& f : files) {
    for (const std::string& name : f.Names()) {
      auto split = data::SplitShardName(name);
      if (!split.ok()) return InvalidArgument("resharding a checkpoint: " + f.path() + ": " + split.status().message());
      auto [base, begin] = std::move(split).value();
      pieces[base].push_back({begin, f.Find(name), name.find('@') == std::string::npos});
    }
  }
  for (const StateTensor& t : tensors) {
    auto split = data::SplitShardName(t.name);
    if (!split.ok()) return InvalidArgument("resharding a checkpoint: " + split.status().message());
    auto [base, begin] = std::move(split).value();
    auto it = pieces.find(base);
    if (it == pieces.end()) return InvalidArgument("resharding a checkpoint: tensor \"" + base + "\" is in none of its files");
    const int64_t end = begin + static_cast<int64_t>(t.data.size());
    // Copy each piece's overlap with [begin, end); every element must be covered once at least.
    std::vector<bool> covered(t.data.size(), false);
    for (const auto& [from, values, whole] : it->second) {
      if (whole && t.name.find('@') == std::string::npos && values.size() != t.data.size()) {
        return InvalidArgument("resharding a checkpoint: tensor \"" + base + "\" has " + std::to_string(values.size()) +
                               " elements, this rank's has " + std::to_string(t.data.size()));
      }
      const int64_t lo = std::max(begin, from), hi = std::min(end, from + static_cast<int64_t>(values.size()));
      if (lo >= hi) continue;
      std::copy(values.begin() + (lo - from), values.begin() + (hi - from), t.data.begin() + (lo - begin));
      std::fill(covered.begin() + (lo - begin), covered.begin() + (hi - begin), true);
    }
    if (auto gap = std::find(covered.begin(), covered.end(), false); gap != covered.end()) {
      return InvalidArgument("resharding a checkpoint: element " + std::to_string(begin + (gap - covered.begin())) +
                             " of \"" + base + "\" is in none of its files (another model or partition?)");
    }
  }
  return info;
}

}  // namespace pipecoord::worker
