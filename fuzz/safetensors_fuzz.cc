// Fuzz target: a safetensors file, as SafetensorsFile and SafetensorsCheckpoint read weights
// (data/safetensors_format.h). What the reader accepts must tile its data buffer exactly (each
// tensor where the one before ends, sized by its dtype and shape), and written back by our
// writer must read back to the same tensors, bytes and metadata. A refusal names the file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/safetensors_format.h"
#include "fuzz/fuzz_check.h"

using namespace pipecoord::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  auto layout = ParseSafetensors(file, "fuzz.safetensors");
  if (!layout.ok()) {
    FUZZ_CHECK(layout.status().message().rfind("fuzz.safetensors: ", 0) == 0, "a refusal not naming the file: %s",
               layout.status().message().c_str());
    return 0;
  }
  FUZZ_CHECK(layout->data_start + layout->data_size == size, "data start %llu + size %llu != %zu",
             static_cast<unsigned long long>(layout->data_start), static_cast<unsigned long long>(layout->data_size), size);
  uint64_t expected = 0;
  std::vector<TensorToWrite> tensors;
  for (const SafetensorsTensor& t : layout->tensors) {
    FUZZ_CHECK(t.begin == expected, "tensor %s begins at %llu, the one before ends at %llu", t.name.c_str(),
               static_cast<unsigned long long>(t.begin), static_cast<unsigned long long>(expected));
    FUZZ_CHECK(t.bytes() == t.elements() * static_cast<uint64_t>(DtypeSize(t.dtype)), "tensor %s: size", t.name.c_str());
    FUZZ_CHECK(layout->Find(t.name) == &t, "Find(%s) is another tensor", t.name.c_str());
    expected = t.end;
    tensors.push_back({t.name, t.dtype, t.shape, file.subspan(layout->data_start + t.begin, t.bytes())});
  }
  FUZZ_CHECK(expected == layout->data_size, "the tensors end at %llu of %llu", static_cast<unsigned long long>(expected),
             static_cast<unsigned long long>(layout->data_size));

  auto written = SerializeSafetensors(tensors, layout->metadata);
  FUZZ_CHECK(written.ok(), "what was read cannot be written: %s", written.status().message().c_str());
  const std::span<const uint8_t> again_bytes(reinterpret_cast<const uint8_t*>(written->data()), written->size());
  auto again = ParseSafetensors(again_bytes, "again");
  FUZZ_CHECK(again.ok(), "our own file does not read back: %s", again.status().message().c_str());
  FUZZ_CHECK(again->metadata == layout->metadata, "the metadata changed");
  FUZZ_CHECK(again->tensors.size() == layout->tensors.size(), "%zu tensors became %zu", layout->tensors.size(),
             again->tensors.size());
  FUZZ_CHECK(again->data_start % 8 == 0, "our data buffer starts at %llu", static_cast<unsigned long long>(again->data_start));
  for (const TensorToWrite& t : tensors) {
    const SafetensorsTensor* back = again->Find(t.name);
    FUZZ_CHECK(back != nullptr, "tensor %s is gone", t.name.c_str());
    FUZZ_CHECK(back->dtype == t.dtype && back->shape == t.shape, "tensor %s changed dtype or shape", t.name.c_str());
    const auto bytes = again_bytes.subspan(again->data_start + back->begin, back->bytes());
    FUZZ_CHECK(std::equal(bytes.begin(), bytes.end(), t.bytes.begin(), t.bytes.end()), "tensor %s changed bytes",
               t.name.c_str());
  }
  return 0;
}
