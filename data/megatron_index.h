// Megatron-LM's indexed dataset, read directly: PREFIX.bin holds the token ids and PREFIX.idx
// says where each sequence and document is. Large tokenized corpora already exist in this
// format (Megatron-LM's tools/preprocess_data.py writes it), so they need no conversion.
//
// The layout, from the format's public description (the reader and writer classes _IndexReader,
// _IndexWriter and IndexedDatasetBuilder in NVIDIA/Megatron-LM,
// megatron/core/datasets/indexed_dataset.py, read at commit 00caa53a); all integers are
// little-endian, the arrays packed with no padding:
//
//   .idx  offset  size          field
//         0       9             magic: the bytes "MMIDIDX" followed by two zero bytes
//         9       8  uint64     version: 1
//         17      1  uint8      dtype code of the token ids in .bin: 1 uint8, 2 int8, 3 int16,
//                               4 int32, 5 int64, 6 float64, 7 float32, 8 uint16 (Megatron-LM
//                               picks uint16 for vocabularies below 65500, else int32)
//         18      8  uint64     S, the number of sequences
//         26      8  uint64     D, the number of entries of the document index (documents + 1)
//         34      4 S  int32    the length of each sequence, in tokens
//         34+4S   8 S  int64    the byte offset of each sequence in .bin
//         34+12S  8 D  int64    the document index: document d holds sequences
//                               [doc[d], doc[d+1]); doc[0] is 0 and doc[D-1] is S
//        (34+12S+8D  S  int8    only in multimodal datasets: a mode per sequence)
//
//   .bin  the sequences' token ids, each sequence at its offset.
//
// What we require beyond the layout (Megatron-LM's own builder always writes files that meet
// it): sequences stored in order without gaps (sequence i starts where i-1 ends, the first at
// byte 0) and a .bin exactly as long as the sequences, so the .bin is one token stream. Token
// ids must be integers (float dtypes are refused); multimodal indexes (trailing modes) are
// refused. Empty documents (doc[d] == doc[d+1]) are allowed and dropped from the document
// starts. The index records no vocabulary size: the reader is given it.
#ifndef PIPECOORD_DATA_MEGATRON_INDEX_H_
#define PIPECOORD_DATA_MEGATRON_INDEX_H_

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "data/token_stream.h"

namespace pipecoord::data {

inline constexpr char kMegatronIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronIndexVersion = 1;
inline constexpr uint64_t kMegatronIndexHeaderBytes = 34;

struct MegatronIndex {
  TokenDtype dtype = TokenDtype::kUint16;
  uint64_t sequences = 0;
  uint64_t documents = 0;  // D - 1
  uint64_t tokens = 0;     // the sum of the sequence lengths
  // Token offset of each non-empty document, strictly increasing, 0 first when tokens > 0.
  std::vector<uint64_t> document_starts;
};

// Parses and checks an .idx file's bytes. Errors name `idx_name` and the rule: a bad magic or
// version, an unknown or non-integer dtype code, a file too short for its counts (truncated) or
// longer (multimodal or garbage), a negative length, a sequence not where the one before ends,
// a document index that does not run from 0 to S in order.
Result<MegatronIndex> ParseMegatronIndex(std::span<const uint8_t> idx, std::string_view idx_name);

// OK when a .bin of `bin_size` bytes holds exactly the index's tokens; otherwise names both
// files: "d/c.bin: 1000 bytes, but d/c.idx's 7 sequences of uint16 tokens take 1024: truncated".
Status CheckMegatronBin(const MegatronIndex& index, uint64_t bin_size, std::string_view bin_name,
                        std::string_view idx_name);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_MEGATRON_INDEX_H_
