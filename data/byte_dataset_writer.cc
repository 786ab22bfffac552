#include "data/byte_dataset_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "data/flat_sidecar.h"
#include "data/sequence_sampler.h"

namespace pipecoord::data {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

// One split's output: token bytes appended to a temporary .bin.
struct SplitWriter {
  std::string bin_path, tmp_path;
  File file;
  FlatSidecar sidecar;
  int error = 0;

  void Append(const uint8_t* text, size_t n, std::vector<uint8_t>* scratch) {
    scratch->resize(2 * n);
    for (size_t i = 0; i < n; ++i) {
      (*scratch)[2 * i] = text[i];  // uint16 little-endian: the byte, then 0
      (*scratch)[2 * i + 1] = 0;
    }
    if (error == 0 && n > 0 && std::fwrite(scratch->data(), 1, 2 * n, file.get()) != 2 * n) error = errno ? errno : EIO;
  }
};

Status WriteText(const std::string& path, const std::string& text) {
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) return Unavailable("cannot create " + path + ": " + std::strerror(errno));
  if (std::fwrite(text.data(), 1, text.size(), f.get()) != text.size()) {
    return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  }
  if (std::fclose(f.release()) != 0) return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

// Removes the temporary files of a write that did not finish.
struct TemporaryFiles {
  std::vector<std::string> paths;
  bool done = false;
  ~TemporaryFiles() {
    if (done) return;
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};

Status Rename(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) == 0) return Status::Ok();
  return Unavailable("cannot rename " + from + " to " + to + ": " + std::strerror(errno));
}

}  // namespace

Result<ByteDatasetReport> WriteByteDataset(const ByteDatasetOptions& options) {
  if (options.inputs.empty()) return InvalidArgument("no input text files");
  auto split = SplitTail(0, options.val_fraction);  // checks the fraction's range
  if (!split.ok()) return split.status();

  ByteDatasetReport report;
  std::vector<uint64_t> sizes;
  for (const std::string& path : options.inputs) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return InvalidArgument("cannot open " + path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file (its size is needed before reading)");
    sizes.push_back(static_cast<uint64_t>(st.st_size));
    report.input_bytes += sizes.back();
  }
  report.input_files = static_cast<int>(options.inputs.size());
  if (report.input_bytes == 0) return InvalidArgument("the inputs hold no text (0 bytes)");
  split = SplitTail(report.input_bytes, options.val_fraction);
  const uint64_t cut = split->train.end;
  const bool with_val = options.val_fraction > 0;
  if (split->train.size() < 2 || (with_val && split->val.size() < 2)) {
    return InvalidArgument("a validation fraction of " + std::to_string(options.val_fraction) + " of " +
                           std::to_string(report.input_bytes) + " bytes leaves " + std::to_string(split->train.size()) +
                           " for training and " + std::to_string(split->val.size()) +
                           " for validation; each needs at least 2 (a token and the one after it)");
  }

  struct stat out {};
  if (::stat(options.out_dir.c_str(), &out) == 0) {
    if (!S_ISDIR(out.st_mode)) return InvalidArgument(options.out_dir + ": exists and is not a folder");
  } else if (::mkdir(options.out_dir.c_str(), 0755) != 0) {
    return Unavailable("cannot create the folder " + options.out_dir + ": " + std::strerror(errno));
  }
  const std::string dir = options.out_dir.empty() || options.out_dir.back() == '/' ? options.out_dir : options.out_dir + "/";

  TemporaryFiles temporary;
  SplitWriter writers[2];
  const char* names[2] = {"train", "val"};
  for (int i = 0; i < (with_val ? 2 : 1); ++i) {
    SplitWriter& w = writers[i];
    w.bin_path = dir + names[i] + ".bin";
    w.tmp_path = w.bin_path + ".tmp";
    w.file.reset(std::fopen(w.tmp_path.c_str(), "wb"));
    temporary.paths.push_back(w.tmp_path);
    if (!w.file) return Unavailable("cannot create " + w.tmp_path + ": " + std::strerror(errno));
    w.sidecar.dtype = TokenDtype::kUint16;
    w.sidecar.vocab_size = kByteVocabSize;
    w.sidecar.tokenizer = "bytes";
  }
  // The validation tail starts with the rest of the document the cut falls in (or a new one).
  if (with_val) writers[1].sidecar.document_starts.push_back(0);

  std::vector<uint8_t> chunk(kChunkBytes), scratch;
  uint64_t position = 0;
  for (size_t f = 0; f < options.inputs.size(); ++f) {
    const std::string& path = options.inputs[f];
    if (sizes[f] == 0) continue;
    if (position < cut) {
      writers[0].sidecar.document_starts.push_back(position);
    } else if (position > cut) {
      writers[1].sidecar.document_starts.push_back(position - cut);
    }
    File in(std::fopen(path.c_str(), "rb"));
    if (!in) return InvalidArgument("cannot open " + path + ": " + std::strerror(errno));
    uint64_t read_here = 0;
    for (;;) {
      const size_t n = std::fread(chunk.data(), 1, chunk.size(), in.get());
      if (n == 0) {
        if (std::ferror(in.get())) return InvalidArgument("cannot read " + path + ": " + std::strerror(errno));
        break;
      }
      read_here += n;
      if (read_here > sizes[f]) break;
      // The part of this chunk before the cut goes to train, the rest to val.
      const uint64_t to_train = position >= cut ? 0 : std::min<uint64_t>(n, cut - position);
      writers[0].Append(chunk.data(), static_cast<size_t>(to_train), &scratch);
      if (to_train < n) writers[1].Append(chunk.data() + to_train, static_cast<size_t>(n - to_train), &scratch);
      position += n;
      if (options.progress) options.progress(position, report.input_bytes);
    }
    if (read_here != sizes[f]) {
      return InvalidArgument(path + ": changed while being read (" + std::to_string(sizes[f]) + " bytes, then " +
                             std::to_string(read_here) + ")");
    }
  }

  WrittenSplit* outs[2] = {&report.train, &report.val};
  for (int i = 0; i < (with_val ? 2 : 1); ++i) {
    SplitWriter& w = writers[i];
    if (std::fclose(w.file.release()) != 0 && w.error == 0) w.error = errno ? errno : EIO;
    if (w.error != 0) return Unavailable("cannot write " + w.tmp_path + ": " + std::strerror(w.error));
    const TokenRange range = i == 0 ? split->train : split->val;
    w.sidecar.tokens = range.size();
    outs[i]->bin_path = w.bin_path;
    outs[i]->sidecar_path = dir + names[i] + ".json";
    outs[i]->tokens = range.size();
    outs[i]->documents = w.sidecar.document_starts.size();
    temporary.paths.push_back(outs[i]->sidecar_path + ".tmp");
    PIPECOORD_RETURN_IF_ERROR(WriteText(outs[i]->sidecar_path + ".tmp", FlatSidecarJson(w.sidecar)));
  }
  for (int i = 0; i < (with_val ? 2 : 1); ++i) {
    PIPECOORD_RETURN_IF_ERROR(Rename(writers[i].tmp_path, writers[i].bin_path));
  }
  for (int i = 0; i < (with_val ? 2 : 1); ++i) {
    PIPECOORD_RETURN_IF_ERROR(Rename(outs[i]->sidecar_path + ".tmp", outs[i]->sidecar_path));
  }
  temporary.done = true;
  return report;
}

}  // namespace pipecoord::data
