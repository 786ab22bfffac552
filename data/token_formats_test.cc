// The token formats over bytes in memory: the token stream's decoding, the flat sidecar and
// Megatron-LM's index, each rule with its exact message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "data/flat_sidecar.h"
#include "data/little_endian.h"
#include "data/megatron_index.h"
#include "data/token_stream.h"

namespace pipecoord::data {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::string Packed(const std::vector<uint64_t>& values, int width) {
  std::string s;
  for (uint64_t v : values) AppendLittleEndian(&s, v, width);
  return s;
}

TEST(TokenStream, DecodesEveryDtypeLittleEndianAndSignExtends) {
  const std::string u16 = Packed({1, 0xFFFF, 256}, 2);
  TokenStream s16(Bytes(u16), TokenDtype::kUint16);
  ASSERT_EQ(s16.size(), 3u);
  EXPECT_EQ(s16.At(0), 1);
  EXPECT_EQ(s16.At(1), 65535);
  EXPECT_EQ(s16.At(2), 256);

  const std::string i16 = Packed({0xFFFF, 0x7FFF, 0x8000}, 2);
  TokenStream si16(Bytes(i16), TokenDtype::kInt16);
  EXPECT_EQ(si16.At(0), -1);
  EXPECT_EQ(si16.At(1), 32767);
  EXPECT_EQ(si16.At(2), -32768);

  const std::string i8 = Packed({0x80, 0x7F}, 1);
  EXPECT_EQ(TokenStream(Bytes(i8), TokenDtype::kInt8).At(0), -128);
  EXPECT_EQ(TokenStream(Bytes(i8), TokenDtype::kUint8).At(0), 128);

  const std::string u32 = Packed({0xFFFFFFFFu, 70000}, 4);
  EXPECT_EQ(TokenStream(Bytes(u32), TokenDtype::kUint32).At(0), 4294967295);
  EXPECT_EQ(TokenStream(Bytes(u32), TokenDtype::kInt32).At(0), -1);
  EXPECT_EQ(TokenStream(Bytes(u32), TokenDtype::kInt32).At(1), 70000);

  const std::string i64 = Packed({0xFFFFFFFFFFFFFFFEull, 5}, 8);
  EXPECT_EQ(TokenStream(Bytes(i64), TokenDtype::kInt64).At(0), -2);
  EXPECT_EQ(TokenStream(Bytes(i64), TokenDtype::kInt64).At(1), 5);
}

TEST(TokenStream, CopiesARangeAsInt32) {
  for (TokenDtype dtype : {TokenDtype::kUint16, TokenDtype::kInt32, TokenDtype::kUint32, TokenDtype::kUint8,
                           TokenDtype::kInt16, TokenDtype::kInt64}) {
    std::vector<uint64_t> ids;
    for (uint64_t i = 0; i < 20; ++i) ids.push_back((i * 13 + 5) % 200);
    const std::string bytes = Packed(ids, TokenDtypeSize(dtype));
    TokenStream s(Bytes(bytes), dtype);
    std::vector<int32_t> out(7, -99);
    ASSERT_TRUE(s.CopyTo(11, out));
    for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], static_cast<int32_t>(ids[11 + i])) << TokenDtypeName(dtype) << " " << i;
  }
}

TEST(TokenStream, CheckTokenIdsNamesTheFileTheIdAndItsOffset) {
  const std::string bytes = Packed({3, 255, 256, 7}, 2);
  TokenStream s(Bytes(bytes), TokenDtype::kUint16);
  EXPECT_TRUE(CheckTokenIds(s, 257, "d/train.bin", "x").ok());
  EXPECT_EQ(CheckTokenIds(s, 256, "d/train.bin", "d/train.json's vocab_size").message(),
            "d/train.bin: token 256 at offset 2 (byte 4) is >= the vocabulary size 256 (d/train.json's vocab_size)");
  const std::string big = Packed({5, 0xFFFFFFFF}, 4);
  EXPECT_EQ(CheckTokenIds(TokenStream(Bytes(big), TokenDtype::kUint32), int64_t{1} << 31, "u.bin", "v").message(),
            "u.bin: token 4294967295 at offset 1 (byte 4) is >= the vocabulary size 2147483648 (v)");
  EXPECT_TRUE(CheckTokenIds(TokenStream(Bytes(big), TokenDtype::kUint8), 256, "u.bin", "v").ok());
  const std::string neg = Packed({1, 0xFFFFFFFD}, 4);
  EXPECT_EQ(CheckTokenIds(TokenStream(Bytes(neg), TokenDtype::kInt32), 10, "c.bin", "v").message(),
            "c.bin: token -3 at offset 1 (byte 4) is negative");
}

TEST(FlatSidecar, ReadsEveryKeyAndWritesItBack) {
  auto s = ParseFlatSidecar(
      R"({"dtype": "uint32", "vocab_size": 100000, "tokens": 30, "document_starts": [0, 10, 29], "tokenizer": "bpe"})",
      "s.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->dtype, TokenDtype::kUint32);
  EXPECT_EQ(s->vocab_size, 100000);
  EXPECT_EQ(s->tokens, 30u);
  EXPECT_EQ(s->document_starts, (std::vector<uint64_t>{0, 10, 29}));
  EXPECT_EQ(s->tokenizer, "bpe");
  const std::string json = FlatSidecarJson(*s);
  EXPECT_EQ(json,
            "{\"dtype\": \"uint32\", \"vocab_size\": 100000, \"tokens\": 30, \"document_starts\": [0, 10, 29], "
            "\"tokenizer\": \"bpe\"}\n");
  auto again = ParseFlatSidecar(json, "s.json");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->document_starts, s->document_starts);

  auto minimal = ParseFlatSidecar(R"({"dtype": "uint16", "vocab_size": 65536})", "m.json");
  ASSERT_TRUE(minimal.ok()) << minimal.status().message();
  EXPECT_FALSE(minimal->tokens.has_value());
  EXPECT_TRUE(minimal->document_starts.empty());
}

TEST(FlatSidecar, RefusesEachBrokenRuleByName) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "s.json: expected a JSON object, got an array"},
      {"{", "s.json: not JSON: line 1, column 2: expected a quoted member name"},
      {R"({"vocab_size": 5})", "s.json: dtype: required (\"uint16\" or \"uint32\")"},
      {R"({"dtype": "float32", "vocab_size": 5})", "s.json: dtype: expected \"uint16\" or \"uint32\", got \"float32\""},
      {R"({"dtype": "uint16"})", "s.json: vocab_size: required (every token id is below it)"},
      {R"({"dtype": "uint16", "vocab_size": 65537})", "s.json: vocab_size: expected an integer in [1, 65536], got 65537"},
      {R"({"dtype": "uint32", "vocab_size": 0})", "s.json: vocab_size: expected an integer in [1, 2147483648], got 0"},
      {R"({"dtype": "uint16", "vocab_size": 5, "tokens": -1})",
       "s.json: tokens: expected an integer in [0, 4611686018427387904], got -1"},
      {R"({"dtype": "uint16", "vocab_size": 5, "document_starts": 3})",
       "s.json: document_starts: expected an array of token offsets, got 3"},
      {R"({"dtype": "uint16", "vocab_size": 5, "document_starts": [2, 4]})",
       "s.json: document_starts[0]: the first document starts at 0, got 2"},
      {R"({"dtype": "uint16", "vocab_size": 5, "document_starts": [0, 4, 4]})",
       "s.json: document_starts[2]: 4 must be greater than the start before it (4)"},
      {R"({"dtype": "uint16", "vocab_size": 5, "tokenizer": 1})", "s.json: tokenizer: expected a string, got 1"},
      {R"({"dtype": "uint16", "vocab_size": 5, "doc_starts": []})",
       "s.json: unknown key \"doc_starts\" (known: dtype, vocab_size, tokens, document_starts, tokenizer)"},
      {R"({"dtype": "uint16", "vocab_size": 5, "vocab_size": 6})", "s.json: key \"vocab_size\" appears twice"},
  };
  for (const auto& [json, message] : cases) {
    auto s = ParseFlatSidecar(json, "s.json");
    ASSERT_FALSE(s.ok()) << json;
    EXPECT_EQ(s.status().message(), message) << json;
  }
}

TEST(FlatSidecar, TheBinMustMatchTheSidecar) {
  FlatSidecar s;
  s.dtype = TokenDtype::kUint16;
  s.vocab_size = 256;
  auto n = CheckFlatBin(s, 2000, "t.bin", "t.json");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1000u);
  EXPECT_EQ(CheckFlatBin(s, 2001, "t.bin", "t.json").status().message(),
            "t.bin: 2001 bytes is not a whole number of uint16 tokens (2 bytes each, as t.json says): the file is "
            "truncated");
  s.tokens = 1200;
  EXPECT_EQ(CheckFlatBin(s, 2000, "t.bin", "t.json").status().message(),
            "t.json says 1200 tokens (2400 bytes of uint16), but t.bin has 2000 bytes (1000 tokens)");
  s.tokens = 1000;
  s.document_starts = {0, 999};
  EXPECT_TRUE(CheckFlatBin(s, 2000, "t.bin", "t.json").ok());
  s.document_starts = {0, 1000};
  EXPECT_EQ(CheckFlatBin(s, 2000, "t.bin", "t.json").status().message(),
            "t.json: document_starts[1] = 1000 is not below the 1000 tokens of t.bin");
  s.dtype = TokenDtype::kUint32;
  s.tokens.reset();
  s.document_starts.clear();
  EXPECT_EQ(CheckFlatBin(s, 6, "t.bin", "t.json").status().message(),
            "t.bin: 6 bytes is not a whole number of uint32 tokens (4 bytes each, as t.json says): the file is "
            "truncated");
}

// An .idx written field by field, to break one field at a time.
struct Idx {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t code = 8;
  std::vector<int64_t> lengths = {3, 2, 10, 7, 1, 30, 0};
  std::vector<int64_t> pointers;  // empty: the contiguous ones for `code`'s width
  std::vector<int64_t> docs = {0, 2, 2, 4, 5, 7};
  std::optional<uint64_t> sequences, doc_entries;  // override the counts
  std::string trailing;

  std::string Bytes() const {
    std::string s = magic;
    AppendLittleEndian(&s, version, 8);
    s.push_back(static_cast<char>(code));
    AppendLittleEndian(&s, sequences.value_or(lengths.size()), 8);
    AppendLittleEndian(&s, doc_entries.value_or(docs.size()), 8);
    for (int64_t l : lengths) AppendLittleEndian(&s, static_cast<uint64_t>(l), 4);
    std::vector<int64_t> p = pointers;
    if (p.empty()) {
      const int width = code == 4 ? 4 : code == 5 ? 8 : code == 1 || code == 2 ? 1 : 2;
      int64_t at = 0;
      for (int64_t l : lengths) {
        p.push_back(at);
        at += l * width;
      }
    }
    for (int64_t v : p) AppendLittleEndian(&s, static_cast<uint64_t>(v), 8);
    for (int64_t d : docs) AppendLittleEndian(&s, static_cast<uint64_t>(d), 8);
    return s + trailing;
  }
};

Result<MegatronIndex> Parse(const Idx& idx) {
  const std::string bytes = idx.Bytes();
  return ParseMegatronIndex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
                            "c.idx");
}

TEST(MegatronIndex, ReadsCountsDtypeAndDocumentStarts) {
  auto index = Parse(Idx{});
  ASSERT_TRUE(index.ok()) << index.status().message();
  EXPECT_EQ(index->dtype, TokenDtype::kUint16);
  EXPECT_EQ(index->sequences, 7u);
  EXPECT_EQ(index->documents, 5u);
  EXPECT_EQ(index->tokens, 53u);
  // Documents [3, 2], [], [10, 7], [1], [30, 0]: the empty one is dropped.
  EXPECT_EQ(index->document_starts, (std::vector<uint64_t>{0, 5, 22, 23}));
  EXPECT_TRUE(CheckMegatronBin(*index, 106, "c.bin", "c.idx").ok());
  EXPECT_EQ(CheckMegatronBin(*index, 104, "c.bin", "c.idx").message(),
            "c.bin: 104 bytes, but c.idx's 7 sequences of 53 uint16 tokens take 106: truncated");
  EXPECT_EQ(CheckMegatronBin(*index, 108, "c.bin", "c.idx").message(),
            "c.bin: 108 bytes, but c.idx's 7 sequences of 53 uint16 tokens take 106: the .bin is longer than its index "
            "says");

  Idx i32;
  i32.code = 4;
  auto wide = Parse(i32);
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(wide->dtype, TokenDtype::kInt32);
  EXPECT_TRUE(CheckMegatronBin(*wide, 212, "c.bin", "c.idx").ok());

  Idx empty;
  empty.lengths = {};
  empty.docs = {0};
  auto none = Parse(empty);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->tokens, 0u);
  EXPECT_TRUE(none->document_starts.empty());
}

TEST(MegatronIndex, RefusesEachBrokenRuleByName) {
  std::vector<std::pair<Idx, std::string>> cases;
  auto add = [&](std::string message, auto change) {
    Idx idx;
    change(idx);
    cases.emplace_back(idx, std::move(message));
  };
  add("c.idx: bad magic: the file starts with 4d 4d 49 44 49 44 58 31 00, a Megatron-LM index with 4d 4d 49 44 49 44 "
      "58 00 00 (\"MMIDIDX\\0\\0\")",
      [](Idx& i) { i.magic[7] = '1'; });
  add("c.idx: version 2, only version 1 is known", [](Idx& i) { i.version = 2; });
  add("c.idx: unknown dtype code 9 (known: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)",
      [](Idx& i) { i.code = 9; });
  add("c.idx: dtype code 7 (float32) cannot hold token ids; token datasets are integers", [](Idx& i) { i.code = 7; });
  add("c.idx: truncated: 166 bytes, but 8 sequences and 6 document index entries take 178",
      [](Idx& i) { i.sequences = 8; });
  add("c.idx: truncated: 166 bytes, but 7 sequences and 1000000000000000000 document index entries take "
      "8000000000000000118",
      [](Idx& i) { i.doc_entries = 1000000000000000000ull; });
  add("c.idx: 7 bytes after the document index, one per sequence: a multimodal index (sequence modes), which is not "
      "supported",
      [](Idx& i) { i.trailing = std::string(7, '\0'); });
  add("c.idx: 169 bytes, but 7 sequences and 6 document index entries take 166: 3 bytes too many",
      [](Idx& i) { i.trailing = "abc"; });
  add("c.idx: the document index is empty; it starts with 0 and ends with the sequence count", [](Idx& i) {
    i.docs = {};
  });
  add("c.idx: sequence 2 has a negative length (-10)", [](Idx& i) {
    i.lengths[2] = -10;
    i.pointers = {0, 6, 10, 0, 14, 16, 76};
  });
  add("c.idx: sequence 3 starts at byte 32 of the .bin, expected 30 (where the sequence before it ends): sequences "
      "must be stored in order without gaps",
      [](Idx& i) { i.pointers = {0, 6, 10, 32, 44, 46, 106}; });
  add("c.idx: sequence 0 starts at byte 2 of the .bin, expected 0 (where the sequence before it ends): sequences must "
      "be stored in order without gaps",
      [](Idx& i) { i.pointers = {2, 6, 10, 30, 44, 46, 106}; });
  add("c.idx: document index entry 0 (1): the document index starts with 0", [](Idx& i) { i.docs[0] = 1; });
  add("c.idx: document index entry 3 (1) is below the entry before it (2): the document index must not decrease",
      [](Idx& i) { i.docs[3] = 1; });
  add("c.idx: document index entry 4 (8) is past the 7 sequences", [](Idx& i) { i.docs[4] = 8; });
  add("c.idx: the document index ends at 5, not at the sequence count 7: sequences after it belong to no document",
      [](Idx& i) { i.docs[5] = 5; });
  for (const auto& [idx, message] : cases) {
    auto parsed = Parse(idx);
    ASSERT_FALSE(parsed.ok()) << message;
    EXPECT_EQ(parsed.status().message(), message);
  }
  const std::string short_file = std::string("MMIDIDX\0\0", 9) + "abc";
  auto truncated = ParseMegatronIndex(Bytes(short_file), "c.idx");
  EXPECT_EQ(truncated.status().message(), "c.idx: truncated: 12 bytes, the header alone takes 34");
  auto tiny = ParseMegatronIndex(Bytes("MM"), "c.idx");
  EXPECT_EQ(tiny.status().message(), "c.idx: truncated: 2 bytes, the header alone takes 34");
}

}  // namespace
}  // namespace pipecoord::data
