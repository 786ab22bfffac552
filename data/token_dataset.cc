#include "data/token_dataset.h"

#include <sys/stat.h>

#include <string_view>

#include "data/flat_sidecar.h"
#include "data/megatron_index.h"

namespace pipecoord::data {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string_view AsText(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

Result<TokenDataset> TokenDataset::Open(const std::string& prefix_or_bin, const TokenDatasetOptions& options) {
  std::string prefix = prefix_or_bin;
  if (prefix.size() > 4 && prefix.compare(prefix.size() - 4, 4, ".bin") == 0) prefix.resize(prefix.size() - 4);
  const std::string bin_path = prefix + ".bin", json_path = prefix + ".json", idx_path = prefix + ".idx";
  if (options.vocab_size < 0 || options.vocab_size > (int64_t{1} << 31)) {
    return InvalidArgument("vocabulary size must be in [0, 2^31] (ids are int32), got " + std::to_string(options.vocab_size));
  }
  const bool flat = Exists(json_path), megatron = Exists(idx_path);
  if (flat && megatron) {
    return InvalidArgument(prefix + ": both " + json_path + " (flat) and " + idx_path +
                           " (Megatron-LM) exist; keep the one that describes " + bin_path);
  }
  if (!flat && !megatron) {
    return InvalidArgument(prefix + ": no dataset: neither " + json_path + " (flat token sidecar) nor " + idx_path +
                           " (Megatron-LM index) exists");
  }
  auto bin = MappedFile::Open(bin_path);
  if (!bin.ok()) return bin.status();
  auto layout = MappedFile::Open(flat ? json_path : idx_path);
  if (!layout.ok()) return layout.status();

  TokenDataset ds(std::move(bin).value(), layout->path());
  std::string vocab_source;
  if (flat) {
    ds.format_ = Format::kFlat;
    auto sidecar = ParseFlatSidecar(AsText(layout->bytes()), json_path);
    if (!sidecar.ok()) return sidecar.status();
    auto count = CheckFlatBin(*sidecar, ds.bin_.size(), bin_path, json_path);
    if (!count.ok()) return count.status();
    if (options.vocab_size > 0 && sidecar->vocab_size > options.vocab_size) {
      return InvalidArgument(json_path + ": vocab_size " + std::to_string(sidecar->vocab_size) +
                             " is larger than the model's vocabulary (" + std::to_string(options.vocab_size) + ")");
    }
    ds.tokens_ = TokenStream(ds.bin_.bytes(), sidecar->dtype);
    ds.vocab_size_ = sidecar->vocab_size;
    ds.document_starts_ = sidecar->document_starts;
    if (ds.document_starts_.empty() && *count > 0) ds.document_starts_.push_back(0);
    vocab_source = json_path + "'s vocab_size";
  } else {
    ds.format_ = Format::kMegatron;
    if (options.vocab_size <= 0) {
      return InvalidArgument(idx_path + ": a Megatron-LM index records no vocabulary size; give the model's");
    }
    auto index = ParseMegatronIndex(layout->bytes(), idx_path);
    if (!index.ok()) return index.status();
    PIPECOORD_RETURN_IF_ERROR(CheckMegatronBin(*index, ds.bin_.size(), bin_path, idx_path));
    ds.tokens_ = TokenStream(ds.bin_.bytes(), index->dtype);
    ds.vocab_size_ = options.vocab_size;
    ds.document_starts_ = std::move(index->document_starts);
    vocab_source = "the model's vocabulary";
  }
  if (options.check_tokens) {
    PIPECOORD_RETURN_IF_ERROR(CheckTokenIds(ds.tokens_, ds.vocab_size_, bin_path, vocab_source));
  }
  return ds;
}

}  // namespace pipecoord::data
