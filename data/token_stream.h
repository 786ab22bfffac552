// TokenStream: a view of token ids stored back to back as little-endian integers of one width,
// the body of both dataset formats (flat_sidecar.h, megatron_index.h). It neither owns nor
// copies the bytes: a dataset maps its file and hands the bytes here.
#ifndef PIPECOORD_DATA_TOKEN_STREAM_H_
#define PIPECOORD_DATA_TOKEN_STREAM_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord::data {

// The integer types token ids are stored in. The flat format writes uint16 or uint32; Megatron-LM
// writes uint16 below 65500 ids and int32 above, and its index may name the others.
enum class TokenDtype { kUint8, kInt8, kUint16, kInt16, kUint32, kInt32, kInt64 };

// "uint16", ...; as the sidecar and error messages spell them (NumPy's names).
const char* TokenDtypeName(TokenDtype dtype);
int TokenDtypeSize(TokenDtype dtype);
bool TokenDtypeSigned(TokenDtype dtype);

class TokenStream {
 public:
  TokenStream() = default;
  // bytes.size() must be a multiple of the dtype's size (the format readers check it first;
  // trailing bytes of a partial token are ignored here).
  TokenStream(std::span<const uint8_t> bytes, TokenDtype dtype);

  TokenDtype dtype() const { return dtype_; }
  uint64_t size() const { return size_; }
  // The id of token i < size(), sign-extended for the signed dtypes.
  int64_t At(uint64_t i) const;
  // Tokens [begin, begin + out.size()) as int32 (the model's id type). The caller has checked
  // the ids (CheckTokenIds) and the range. False when the bytes faulted (a mapped file truncated
  // under the stream: mapped_file.h ReadMapped); `out` is then partly written.
  bool CopyTo(uint64_t begin, std::span<int32_t> out) const;
  // The offset of the first id outside [0, vocab_size), if any.
  std::optional<uint64_t> FirstOutside(int64_t vocab_size) const;

 private:
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  TokenDtype dtype_ = TokenDtype::kUint16;
  int width_ = 2;
};

// OK when every id is in [0, vocab_size); otherwise an INVALID_ARGUMENT naming the file, the
// id and its offset: "d/train.bin: token 300 at offset 17 (byte 34) is >= the vocabulary size
// 256 (d/train.json's vocab_size)". `vocab_source` says where the size came from.
Status CheckTokenIds(const TokenStream& tokens, int64_t vocab_size, std::string_view bin_name,
                     std::string_view vocab_source);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_TOKEN_STREAM_H_
