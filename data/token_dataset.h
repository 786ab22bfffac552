// TokenDataset: a tokenized corpus on disk, opened by its prefix and read in place (memory-
// mapped). Two formats, told apart by the file beside PREFIX.bin:
//   PREFIX.json  the flat format (flat_sidecar.h): nanoGPT-style uint16/uint32 ids + a sidecar
//   PREFIX.idx   Megatron-LM's indexed dataset (megatron_index.h)
// Opening checks the structure (sizes, headers, the sidecar against the file) and, unless told
// not to, every token id against the vocabulary, so bad data fails here with the file and the
// rule, before any training starts.
#ifndef PIPECOORD_DATA_TOKEN_DATASET_H_
#define PIPECOORD_DATA_TOKEN_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/mapped_file.h"
#include "data/token_stream.h"

namespace pipecoord::data {

struct TokenDatasetOptions {
  // The model's vocabulary. Flat: the sidecar's vocab_size must not exceed it (0: take the
  // sidecar's). Megatron: required, since its index records none.
  int64_t vocab_size = 0;
  // Scan every id once at open (one sequential read of the .bin).
  bool check_tokens = true;
};

class TokenDataset {
 public:
  enum class Format { kFlat, kMegatron };

  // `prefix` names PREFIX.bin and its sidecar; "PREFIX.bin" itself is accepted too. Errors are
  // INVALID_ARGUMENT naming the file: neither or both sidecars present, a file that cannot be
  // read, any rule of the format, a token id outside the vocabulary (with its offset).
  static Result<TokenDataset> Open(const std::string& prefix, const TokenDatasetOptions& options = {});

  Format format() const { return format_; }
  const char* format_name() const { return format_ == Format::kFlat ? "flat" : "megatron"; }
  const std::string& bin_path() const { return bin_.path(); }
  // The sidecar (.json) or index (.idx) the layout came from.
  const std::string& layout_path() const { return layout_path_; }
  const TokenStream& tokens() const { return tokens_; }
  // Every id is below it: the sidecar's vocab_size, or the options' for Megatron.
  int64_t vocab_size() const { return vocab_size_; }
  // Token offset of each document's first token, 0 first (a dataset without boundaries is one
  // document); empty for an empty dataset.
  const std::vector<uint64_t>& document_starts() const { return document_starts_; }

 private:
  TokenDataset(MappedFile bin, std::string layout_path) : bin_(std::move(bin)), layout_path_(std::move(layout_path)) {}

  MappedFile bin_;
  std::string layout_path_;
  Format format_ = Format::kFlat;
  TokenStream tokens_;
  int64_t vocab_size_ = 0;
  std::vector<uint64_t> document_starts_;
};

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_TOKEN_DATASET_H_
