// The safetensors format (Hugging Face's weight files), read and written by our own code:
//
//   bytes 0..8      N, the header's length: uint64, little-endian
//   bytes 8..8+N    the header: a UTF-8 JSON object, possibly padded with trailing spaces
//                     {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
//                      ..., "__metadata__": {"KEY": "VALUE", ...}}
//   bytes 8+N..     the data buffer: each tensor's elements, row-major, little-endian, at
//                   [BEGIN, END) of the buffer
//
// What a file must satisfy to be read (the rules of the reference implementation,
// huggingface/safetensors): N at most 100 MiB and within the file; the header a JSON object
// starting with '{', each name once; "__metadata__", if present, an object of strings; each
// tensor exactly the keys dtype (a known name), shape (non-negative integers; [] is a scalar,
// a 0 dimension an empty tensor) and data_offsets [BEGIN, END] with BEGIN <= END and
// END - BEGIN = the elements times the dtype's size; the tensors, ordered by offset, tile the
// data buffer exactly: each begins where the one before ends (no overlap, no gap), the first at
// 0 and the last ends at the end of the file. Every refusal names the file, the tensor and the
// rule.
//
// Our writer lays tensors out by decreasing element size, then by name (so with the data
// buffer starting at a multiple of 8, which the header's space padding ensures, every tensor is
// aligned to its element size), writes the header's entries in the same order and
// "__metadata__" first.
#ifndef PIPECOORD_DATA_SAFETENSORS_FORMAT_H_
#define PIPECOORD_DATA_SAFETENSORS_FORMAT_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace pipecoord::data {

inline constexpr uint64_t kSafetensorsMaxHeaderBytes = uint64_t{100} << 20;

// The dtypes with whole-byte elements that the reference implementation names.
enum class SafetensorsDtype { kBool, kU8, kI8, kF8E5M2, kF8E4M3, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kF64, kI64, kU64 };

const char* DtypeName(SafetensorsDtype dtype);  // "F32", "BF16", "F8_E4M3", ...
int DtypeSize(SafetensorsDtype dtype);
std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the data buffer
  uint64_t end = 0;
  uint64_t elements() const;  // 1 for a scalar
  uint64_t bytes() const { return end - begin; }
};

struct SafetensorsLayout {
  std::vector<SafetensorsTensor> tensors;  // by offset (the order of the data)
  std::vector<std::pair<std::string, std::string>> metadata;  // "__metadata__", in header order
  uint64_t data_start = 0;  // 8 + N
  uint64_t data_size = 0;   // the file's size - data_start

  // nullptr when absent.
  const SafetensorsTensor* Find(std::string_view name) const;

 private:
  friend Result<SafetensorsLayout> ParseSafetensors(std::span<const uint8_t>, std::string_view);
  std::unordered_map<std::string, size_t> by_name_;
};

// Reads and checks the layout of a whole file's bytes (only the header and the size are read;
// the data is not touched). Errors are INVALID_ARGUMENT: "FILE: tensor \"w\": data_offsets
// [0, 12] hold 12 bytes, but F32 [2, 2] takes 16".
Result<SafetensorsLayout> ParseSafetensors(std::span<const uint8_t> file, std::string_view file_name);

// A tensor to write: its bytes are the elements, row-major, little-endian.
struct TensorToWrite {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<uint64_t> shape;
  std::span<const uint8_t> bytes;
};

// What a writer emits: the first 8 + N bytes of the file, then the tensors' bytes in `order`
// (indices into the given tensors), back to back.
struct SafetensorsPlan {
  std::string head;
  std::vector<size_t> order;
  uint64_t data_size = 0;
};

// Errors: a name given twice, the name "__metadata__", bytes that do not match the dtype and
// shape ("tensor \"w\": 12 bytes given, F32 [2, 2] takes 16"), a shape whose size overflows.
Result<SafetensorsPlan> PlanSafetensors(std::span<const TensorToWrite> tensors,
                                        std::span<const std::pair<std::string, std::string>> metadata);

// The whole file in memory (tests, small files); WriteSafetensorsFile streams to disk instead.
Result<std::string> SerializeSafetensors(std::span<const TensorToWrite> tensors,
                                         std::span<const std::pair<std::string, std::string>> metadata);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_SAFETENSORS_FORMAT_H_
