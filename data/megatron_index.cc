#include "data/megatron_index.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "data/little_endian.h"

namespace pipecoord::data {
namespace {

struct CodeInfo {
  const char* name;
  bool integer;
  TokenDtype dtype;
};

// Megatron-LM's DType codes (megatron_index.h).
bool LookUpCode(uint8_t code, CodeInfo* out) {
  switch (code) {
    case 1: *out = {"uint8", true, TokenDtype::kUint8}; return true;
    case 2: *out = {"int8", true, TokenDtype::kInt8}; return true;
    case 3: *out = {"int16", true, TokenDtype::kInt16}; return true;
    case 4: *out = {"int32", true, TokenDtype::kInt32}; return true;
    case 5: *out = {"int64", true, TokenDtype::kInt64}; return true;
    case 6: *out = {"float64", false, TokenDtype::kInt64}; return true;
    case 7: *out = {"float32", false, TokenDtype::kInt32}; return true;
    case 8: *out = {"uint16", true, TokenDtype::kUint16}; return true;
    default: return false;
  }
}

std::string Hex(std::span<const uint8_t> bytes) {
  std::string s;
  char buf[4];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof buf, "%s%02x", s.empty() ? "" : " ", b);
    s += buf;
  }
  return s;
}

std::string U(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  for (; v > 0; v /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
  return s;
}

}  // namespace

Result<MegatronIndex> ParseMegatronIndex(std::span<const uint8_t> idx, std::string_view idx_name) {
  const std::string name(idx_name);
  const uint64_t size = idx.size();
  if (size >= sizeof kMegatronIndexMagic && std::memcmp(idx.data(), kMegatronIndexMagic, sizeof kMegatronIndexMagic) != 0) {
    return InvalidArgument(name + ": bad magic: the file starts with " + Hex(idx.first(sizeof kMegatronIndexMagic)) +
                           ", a Megatron-LM index with 4d 4d 49 44 49 44 58 00 00 (\"MMIDIDX\\0\\0\")");
  }
  if (size < kMegatronIndexHeaderBytes) {
    return InvalidArgument(name + ": truncated: " + std::to_string(size) + " bytes, the header alone takes " +
                           std::to_string(kMegatronIndexHeaderBytes));
  }
  const uint8_t* p = idx.data();
  const uint64_t version = LoadU64(p + 9);
  if (version != kMegatronIndexVersion) {
    return InvalidArgument(name + ": version " + std::to_string(version) + ", only version 1 is known");
  }
  CodeInfo code;
  if (!LookUpCode(p[17], &code)) {
    return InvalidArgument(name + ": unknown dtype code " + std::to_string(p[17]) +
                           " (known: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)");
  }
  if (!code.integer) {
    return InvalidArgument(name + ": dtype code " + std::to_string(p[17]) + " (" + code.name +
                           ") cannot hold token ids; token datasets are integers");
  }
  MegatronIndex index;
  index.dtype = code.dtype;
  index.sequences = LoadU64(p + 18);
  const uint64_t doc_entries = LoadU64(p + 26);
  // 128-bit: counts read from a damaged file may be near 2^64.
  const unsigned __int128 need = static_cast<unsigned __int128>(kMegatronIndexHeaderBytes) +
                                 static_cast<unsigned __int128>(index.sequences) * 12 +
                                 static_cast<unsigned __int128>(doc_entries) * 8;
  const std::string counts = std::to_string(index.sequences) + " sequences and " + std::to_string(doc_entries) +
                             " document index entries";
  if (size < need) {
    return InvalidArgument(name + ": truncated: " + std::to_string(size) + " bytes, but " + counts + " take " + U(need));
  }
  if (size > need) {
    const uint64_t extra = size - static_cast<uint64_t>(need);
    if (extra == index.sequences) {
      return InvalidArgument(name + ": " + std::to_string(extra) +
                             " bytes after the document index, one per sequence: a multimodal index (sequence modes), "
                             "which is not supported");
    }
    return InvalidArgument(name + ": " + std::to_string(size) + " bytes, but " + counts + " take " + U(need) + ": " +
                           std::to_string(extra) + " bytes too many");
  }
  if (doc_entries == 0) {
    return InvalidArgument(name + ": the document index is empty; it starts with 0 and ends with the sequence count");
  }
  index.documents = doc_entries - 1;

  const uint8_t* lengths = p + kMegatronIndexHeaderBytes;
  const uint8_t* pointers = lengths + 4 * index.sequences;
  const uint8_t* docs = pointers + 8 * index.sequences;
  const uint64_t width = static_cast<uint64_t>(TokenDtypeSize(index.dtype));

  // One pass over documents and sequences together: the document index is checked, each
  // sequence's length and position, and the token offset where each non-empty document begins.
  uint64_t seq = 0, tokens = 0, prev_doc = 0, doc_start = 0;
  for (uint64_t d = 0; d < doc_entries; ++d) {
    const int64_t raw = LoadI64(docs + 8 * d);
    const std::string entry = "document index entry " + std::to_string(d) + " (" + std::to_string(raw) + ")";
    if (d == 0 && raw != 0) return InvalidArgument(name + ": " + entry + ": the document index starts with 0");
    if (raw < 0 || static_cast<uint64_t>(raw) < prev_doc) {
      return InvalidArgument(name + ": " + entry + " is below the entry before it (" + std::to_string(prev_doc) +
                             "): the document index must not decrease");
    }
    if (static_cast<uint64_t>(raw) > index.sequences) {
      return InvalidArgument(name + ": " + entry + " is past the " + std::to_string(index.sequences) + " sequences");
    }
    const uint64_t doc = static_cast<uint64_t>(raw);
    for (; seq < doc; ++seq) {
      const int32_t length = LoadI32(lengths + 4 * seq);
      if (length < 0) {
        return InvalidArgument(name + ": sequence " + std::to_string(seq) + " has a negative length (" +
                               std::to_string(length) + ")");
      }
      const int64_t pointer = LoadI64(pointers + 8 * seq);
      if (pointer < 0 || static_cast<uint64_t>(pointer) != tokens * width) {
        return InvalidArgument(name + ": sequence " + std::to_string(seq) + " starts at byte " + std::to_string(pointer) +
                               " of the .bin, expected " + std::to_string(tokens * width) +
                               " (where the sequence before it ends): sequences must be stored in order without gaps");
      }
      tokens += static_cast<uint64_t>(length);
    }
    // Entry d closes document d-1: sequences [prev_doc, doc), tokens [doc_start, tokens).
    if (d > 0 && tokens > doc_start) index.document_starts.push_back(doc_start);
    doc_start = tokens;
    prev_doc = doc;
  }
  if (prev_doc != index.sequences) {
    return InvalidArgument(name + ": the document index ends at " + std::to_string(prev_doc) + ", not at the sequence count " +
                           std::to_string(index.sequences) + ": sequences after it belong to no document");
  }
  index.tokens = tokens;
  return index;
}

Status CheckMegatronBin(const MegatronIndex& index, uint64_t bin_size, std::string_view bin_name,
                        std::string_view idx_name) {
  const uint64_t width = static_cast<uint64_t>(TokenDtypeSize(index.dtype));
  const uint64_t need = index.tokens * width;
  if (bin_size == need) return Status::Ok();
  const std::string what = std::string(bin_name) + ": " + std::to_string(bin_size) + " bytes, but " + std::string(idx_name) +
                           "'s " + std::to_string(index.sequences) + " sequences of " + std::to_string(index.tokens) + " " +
                           TokenDtypeName(index.dtype) + " tokens take " + std::to_string(need);
  return InvalidArgument(what + (bin_size < need ? ": truncated" : ": the .bin is longer than its index says"));
}

}  // namespace pipecoord::data
