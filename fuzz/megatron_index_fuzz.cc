// Fuzz target: a Megatron-LM index (.idx), as TokenDataset opens one (data/megatron_index.h).
// What the parser accepts must describe a .bin of exactly its tokens (CheckMegatronBin accepts
// that size and refuses one byte more or less), with document starts strictly increasing
// inside the stream. A refusal names the file.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "data/megatron_index.h"
#include "fuzz/fuzz_check.h"

using namespace pipecoord::data;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto index = ParseMegatronIndex(std::span<const uint8_t>(data, size), "fuzz.idx");
  if (!index.ok()) {
    FUZZ_CHECK(index.status().message().rfind("fuzz.idx: ", 0) == 0, "a refusal not naming the file: %s",
               index.status().message().c_str());
    return 0;
  }
  const uint64_t bytes = index->tokens * static_cast<uint64_t>(TokenDtypeSize(index->dtype));
  FUZZ_CHECK(CheckMegatronBin(*index, bytes, "fuzz.bin", "fuzz.idx").ok(), "its own size is refused");
  FUZZ_CHECK(!CheckMegatronBin(*index, bytes + 1, "fuzz.bin", "fuzz.idx").ok(), "one byte more is accepted");
  if (bytes > 0) FUZZ_CHECK(!CheckMegatronBin(*index, bytes - 1, "fuzz.bin", "fuzz.idx").ok(), "one byte less is accepted");
  FUZZ_CHECK(index->document_starts.size() <= index->documents, "%zu starts for %llu documents",
             index->document_starts.size(), static_cast<unsigned long long>(index->documents));
  for (size_t i = 0; i < index->document_starts.size(); ++i) {
    const uint64_t s = index->document_starts[i];
    FUZZ_CHECK(s < index->tokens, "document %zu starts at %llu of %llu tokens", i, static_cast<unsigned long long>(s),
               static_cast<unsigned long long>(index->tokens));
    FUZZ_CHECK(i == 0 ? s == 0 : s > index->document_starts[i - 1], "document starts out of order at %zu", i);
  }
  FUZZ_CHECK(index->tokens == 0 || !index->document_starts.empty(), "tokens but no document");
  return 0;
}
