// The flat token format: PREFIX.bin holds the token ids back to back as little-endian uint16 or
// uint32 (what nanoGPT-style trainers write with numpy's tofile), and PREFIX.json, a small
// sidecar, says how to read them:
//
//   {"dtype": "uint16", "vocab_size": 256, "tokens": 1048576,
//    "document_starts": [0, 52311, 104778], "tokenizer": "bytes"}
//
//   dtype            required: "uint16" (vocab_size <= 65536) or "uint32" (<= 2^31: the model's
//                    ids are int32)
//   vocab_size       required: every id in the .bin is below it
//   tokens           optional: the number of tokens, checked against the .bin's size
//   document_starts  optional: the offset (in tokens) where each document begins: 0 first,
//                    strictly increasing, each below the token count; absent, the file is one
//                    document
//   tokenizer        optional, informational: what made the ids ("bytes": pipectl data prepare)
//
// Any other key is refused, so a misspelt one is not silently ignored.
#ifndef PIPECOORD_DATA_FLAT_SIDECAR_H_
#define PIPECOORD_DATA_FLAT_SIDECAR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "data/token_stream.h"

namespace pipecoord::data {

struct FlatSidecar {
  TokenDtype dtype = TokenDtype::kUint16;
  int64_t vocab_size = 0;
  std::optional<uint64_t> tokens;
  std::vector<uint64_t> document_starts;
  std::string tokenizer;
};

// Parses and checks a sidecar's text; errors name `sidecar_name` and the key:
// "d/train.json: dtype: expected \"uint16\" or \"uint32\", got \"float32\"".
Result<FlatSidecar> ParseFlatSidecar(std::string_view json, std::string_view sidecar_name);

// The sidecar as JSON text (one line, the keys above in that order; absent ones left out).
std::string FlatSidecarJson(const FlatSidecar& sidecar);

// The number of tokens in a .bin of `bin_size` bytes described by `sidecar`. Errors name both
// files and the rule: a partial token at the end (a truncated file), a token count that
// disagrees with the size, a document start at or past the last token.
Result<uint64_t> CheckFlatBin(const FlatSidecar& sidecar, uint64_t bin_size, std::string_view bin_name,
                              std::string_view sidecar_name);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_FLAT_SIDECAR_H_
