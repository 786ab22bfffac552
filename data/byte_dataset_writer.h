// Text to a token dataset with the byte-level tokenizer: each byte of the text is one token
// (ids 0..255, vocabulary 256), so any text becomes training data with no vocabulary file and
// no external tool. The output is the flat format (flat_sidecar.h) in uint16:
//
//   OUT/train.bin, OUT/train.json   the head of the text
//   OUT/val.bin,   OUT/val.json     the last round(val_fraction x bytes) bytes (SplitTail in
//                                   sequence_sampler.h); not written when the fraction is 0
//
// Each input file is one document (empty files add none); the inputs are concatenated in the
// order given. The files are written under temporary names and renamed into place when whole,
// the sidecars last, so a reader never takes a half-written dataset for a finished one.
#ifndef PIPECOORD_DATA_BYTE_DATASET_WRITER_H_
#define PIPECOORD_DATA_BYTE_DATASET_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::data {

inline constexpr int kByteVocabSize = 256;

struct ByteDatasetOptions {
  std::vector<std::string> inputs;  // text files (regular files: their sizes are read first)
  std::string out_dir;              // created when missing (its parent must exist)
  double val_fraction = 0.1;        // in [0, 1)
  // Called after each chunk with the input bytes done and the total; may be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct WrittenSplit {
  std::string bin_path, sidecar_path;  // empty when not written
  uint64_t tokens = 0;
  uint64_t documents = 0;
};

struct ByteDatasetReport {
  uint64_t input_bytes = 0;
  int input_files = 0;
  WrittenSplit train, val;
};

// Errors are INVALID_ARGUMENT for the caller's input ("cannot open a.txt: ...", "a.txt: not a
// regular file", "the inputs hold no text", a split leaving fewer than 2 tokens on a side: a
// sequence needs a token and its successor) and UNAVAILABLE when the output cannot be written.
Result<ByteDatasetReport> WriteByteDataset(const ByteDatasetOptions& options);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_BYTE_DATASET_WRITER_H_
