// Little-endian integers read from and written to byte buffers without alignment assumptions
// (a memory-mapped file's fields sit at any offset), so every reader here decodes the same way
// on any host and never reads through a misaligned pointer.
#ifndef PIPECOORD_DATA_LITTLE_ENDIAN_H_
#define PIPECOORD_DATA_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string>

namespace pipecoord::data {

// The unsigned value of the `width` (1..8) bytes at p, least significant first.
inline uint64_t LoadLittleEndian(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

inline uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(LoadLittleEndian(p, 2)); }
inline uint32_t LoadU32(const uint8_t* p) { return static_cast<uint32_t>(LoadLittleEndian(p, 4)); }
inline uint64_t LoadU64(const uint8_t* p) { return LoadLittleEndian(p, 8); }
// Two's complement, as the formats store signed fields.
inline int32_t LoadI32(const uint8_t* p) { return static_cast<int32_t>(LoadU32(p)); }
inline int64_t LoadI64(const uint8_t* p) { return static_cast<int64_t>(LoadU64(p)); }

// Appends the `width` low bytes of v, least significant first.
inline void AppendLittleEndian(std::string* out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_LITTLE_ENDIAN_H_
