#include "data/token_stream.h"

#include "data/mapped_read.h"

#include "data/little_endian.h"

namespace pipecoord::data {

const char* TokenDtypeName(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8: return "uint8";
    case TokenDtype::kInt8: return "int8";
    case TokenDtype::kUint16: return "uint16";
    case TokenDtype::kInt16: return "int16";
    case TokenDtype::kUint32: return "uint32";
    case TokenDtype::kInt32: return "int32";
    case TokenDtype::kInt64: return "int64";
  }
  return "?";
}

int TokenDtypeSize(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8: return 1;
    case TokenDtype::kUint16:
    case TokenDtype::kInt16: return 2;
    case TokenDtype::kUint32:
    case TokenDtype::kInt32: return 4;
    case TokenDtype::kInt64: return 8;
  }
  return 1;
}

bool TokenDtypeSigned(TokenDtype dtype) {
  return dtype == TokenDtype::kInt8 || dtype == TokenDtype::kInt16 || dtype == TokenDtype::kInt32 ||
         dtype == TokenDtype::kInt64;
}

TokenStream::TokenStream(std::span<const uint8_t> bytes, TokenDtype dtype)
    : data_(bytes.data()), dtype_(dtype), width_(TokenDtypeSize(dtype)) {
  size_ = bytes.size() / static_cast<uint64_t>(width_);
}

int64_t TokenStream::At(uint64_t i) const {
  const uint64_t raw = LoadLittleEndian(data_ + i * static_cast<uint64_t>(width_), width_);
  if (!TokenDtypeSigned(dtype_) || width_ == 8) return static_cast<int64_t>(raw);
  const int bits = 8 * width_;
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>(raw ^ sign) - static_cast<int64_t>(sign);  // sign-extend
}

bool TokenStream::CopyTo(uint64_t begin, std::span<int32_t> out) const {
  auto copy = [&] {
    if (dtype_ == TokenDtype::kUint16) {  // the common case, without the generic decode
      const uint8_t* p = data_ + 2 * begin;
      for (size_t i = 0; i < out.size(); ++i, p += 2) out[i] = static_cast<int32_t>(p[0] | (p[1] << 8));
      return;
    }
    if (dtype_ == TokenDtype::kInt32 || dtype_ == TokenDtype::kUint32) {  // Megatron-LM's large vocabularies
      const uint8_t* p = data_ + 4 * begin;
      for (size_t i = 0; i < out.size(); ++i, p += 4) out[i] = LoadI32(p);
      return;
    }
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>(At(begin + i));
  };
  return ReadMapped(data_, size_ * static_cast<uint64_t>(width_), copy);
}

std::optional<uint64_t> TokenStream::FirstOutside(int64_t vocab_size) const {
  if (dtype_ == TokenDtype::kUint16) {
    if (vocab_size >= 65536) return std::nullopt;
    for (uint64_t i = 0; i < size_; ++i) {
      if (static_cast<int64_t>(LoadU16(data_ + 2 * i)) >= vocab_size) return i;
    }
    return std::nullopt;
  }
  if (dtype_ == TokenDtype::kInt32 || dtype_ == TokenDtype::kUint32) {
    const bool is_signed = dtype_ == TokenDtype::kInt32;
    for (uint64_t i = 0; i < size_; ++i) {
      const uint32_t raw = LoadU32(data_ + 4 * i);
      const int64_t id = is_signed ? static_cast<int64_t>(static_cast<int32_t>(raw)) : static_cast<int64_t>(raw);
      if (id < 0 || id >= vocab_size) return i;
    }
    return std::nullopt;
  }
  for (uint64_t i = 0; i < size_; ++i) {
    const int64_t id = At(i);
    if (id < 0 || id >= vocab_size) return i;
  }
  return std::nullopt;
}

Status CheckTokenIds(const TokenStream& tokens, int64_t vocab_size, std::string_view bin_name,
                     std::string_view vocab_source) {
  const std::optional<uint64_t> bad = tokens.FirstOutside(vocab_size);
  if (!bad) return Status::Ok();
  const int64_t id = tokens.At(*bad);
  const std::string where = " at offset " + std::to_string(*bad) + " (byte " +
                            std::to_string(*bad * static_cast<uint64_t>(TokenDtypeSize(tokens.dtype()))) + ")";
  if (id < 0) {
    return InvalidArgument(std::string(bin_name) + ": token " + std::to_string(id) + where + " is negative");
  }
  return InvalidArgument(std::string(bin_name) + ": token " + std::to_string(id) + where +
                         " is >= the vocabulary size " + std::to_string(vocab_size) + " (" +
                         std::string(vocab_source) + ")");
}

}  // namespace pipecoord::data
