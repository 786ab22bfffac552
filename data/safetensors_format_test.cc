// The safetensors format over bytes in memory: what our writer lays out, round trips, and
// every refusal of the reader with its exact message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "data/little_endian.h"
#include "data/safetensors_format.h"

namespace pipecoord::data {
namespace {

std::span<const uint8_t> Bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

// A file: the header's length, the header text as given, then `data_size` bytes (0xAB).
std::string File(const std::string& header, size_t data_size) {
  std::string s;
  AppendLittleEndian(&s, header.size(), 8);
  return s + header + std::string(data_size, '\xAB');
}

std::string Floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());  // the test host is little-endian, as the format
  return s;
}

TEST(SafetensorsFormat, WritesTheLayoutDescribedAndReadsItBack) {
  const std::string w = Floats({1, 2, 3, 4, 5, 6});
  const std::string bf16("\x80\x3f\x00\x40\x40\x40", 6);  // 1, 2, 3 in bf16
  const std::string ids = Floats({0, 0});                 // 8 bytes of I32 zeros
  const std::vector<TensorToWrite> tensors = {
      {"z.bf16", SafetensorsDtype::kBF16, {3}, Bytes(bf16)},
      {"a.weight", SafetensorsDtype::kF32, {2, 3}, Bytes(w)},
      {"ids", SafetensorsDtype::kI32, {2}, Bytes(ids)},
      {"scalar_empty", SafetensorsDtype::kF32, {0, 5}, {}},
  };
  const std::vector<std::pair<std::string, std::string>> metadata = {{"format", "pt"}, {"step", "12"}};
  auto file = SerializeSafetensors(tensors, metadata);
  ASSERT_TRUE(file.ok()) << file.status().message();
  // Largest element first, then by name; data starts at a multiple of 8; compact JSON.
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\",\"step\":\"12\"},"
      "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[24,32]},"
      "\"scalar_empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[32,32]},"
      "\"z.bf16\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[32,38]}}";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  ASSERT_EQ(file->size(), 8 + padded.size() + 38);
  EXPECT_EQ(LoadU64(reinterpret_cast<const uint8_t*>(file->data())), padded.size());
  EXPECT_EQ(file->substr(8, padded.size()), padded);
  EXPECT_EQ(file->substr(8 + padded.size()), w + ids + bf16);

  auto layout = ParseSafetensors(Bytes(*file), "m.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->data_start, 8 + padded.size());
  EXPECT_EQ(layout->data_size, 38u);
  EXPECT_EQ(layout->metadata, metadata);
  ASSERT_EQ(layout->tensors.size(), 4u);
  const SafetensorsTensor* a = layout->Find("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->elements(), 6u);
  EXPECT_EQ(file->substr(layout->data_start + a->begin, a->bytes()), w);
  const SafetensorsTensor* z = layout->Find("z.bf16");
  EXPECT_EQ(file->substr(layout->data_start + z->begin, z->bytes()), bf16);
  EXPECT_EQ(layout->Find("scalar_empty")->bytes(), 0u);
  EXPECT_EQ(layout->Find("nope"), nullptr);
}

TEST(SafetensorsFormat, RoundTripsEveryDtypeAScalarAndNoMetadata) {
  std::vector<std::string> storage;
  std::vector<TensorToWrite> tensors;
  const SafetensorsDtype all[] = {SafetensorsDtype::kBool, SafetensorsDtype::kU8,  SafetensorsDtype::kI8,
                                  SafetensorsDtype::kF8E5M2, SafetensorsDtype::kF8E4M3, SafetensorsDtype::kI16,
                                  SafetensorsDtype::kU16,  SafetensorsDtype::kF16, SafetensorsDtype::kBF16,
                                  SafetensorsDtype::kI32,  SafetensorsDtype::kU32, SafetensorsDtype::kF32,
                                  SafetensorsDtype::kF64,  SafetensorsDtype::kI64, SafetensorsDtype::kU64};
  storage.reserve(std::size(all) + 1);
  for (SafetensorsDtype d : all) {
    std::string bytes;
    for (int i = 0; i < 3 * DtypeSize(d); ++i) bytes.push_back(static_cast<char>(i * 31 + DtypeSize(d)));
    storage.push_back(bytes);
    tensors.push_back({std::string("t_") + DtypeName(d), d, {3}, Bytes(storage.back())});
    EXPECT_EQ(ParseSafetensorsDtype(DtypeName(d)), d);
  }
  storage.push_back(Floats({2.5f}));
  tensors.push_back({"scalar", SafetensorsDtype::kF32, {}, Bytes(storage.back())});
  auto file = SerializeSafetensors(tensors, {});
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto layout = ParseSafetensors(Bytes(*file), "all.safetensors");
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_TRUE(layout->metadata.empty());
  EXPECT_EQ(file->find("__metadata__"), std::string::npos);
  for (const TensorToWrite& t : tensors) {
    const SafetensorsTensor* got = layout->Find(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->dtype, t.dtype);
    EXPECT_EQ(got->shape, t.shape);
    EXPECT_EQ(got->begin % DtypeSize(t.dtype), 0u) << t.name << " is not aligned to its element";
    EXPECT_EQ(file->substr(layout->data_start + got->begin, got->bytes()),
              std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
  }
  EXPECT_EQ(layout->Find("scalar")->elements(), 1u);
  EXPECT_EQ(layout->data_start % 8, 0u);
}

TEST(SafetensorsFormat, ReadsAHeaderWithSpacesAndTensorsInAnyKeyOrder) {
  const std::string header =
      R"({ "b" : {"data_offsets": [8, 12], "shape": [1], "dtype": "I32"},
           "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]} })";
  auto layout = ParseSafetensors(Bytes(File(header + "    ", 12)), "x");
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  ASSERT_EQ(layout->tensors.size(), 2u);
  EXPECT_EQ(layout->tensors[0].name, "a");  // by offset
  EXPECT_EQ(layout->tensors[1].name, "b");
}

TEST(SafetensorsFormat, RefusesEachBrokenRuleNamingTheTensor) {
  const std::string a = R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  const std::vector<std::tuple<std::string, size_t, std::string>> cases = {
      {"", 0, ""},  // placeholder for the raw cases below
      {"[1, 2]", 0, "x: the header must be a JSON object starting with '{'"},
      {" {}", 0, "x: the header must be a JSON object starting with '{'"},
      {"{\"a\": ", 0, "x: the header is not JSON: line 1, column 7: unexpected end of text, expected a value"},
      {"{\"a\": \"\xff\"}", 0, "x: the header is not JSON: line 1, column 8: a string holds bytes that are not UTF-8"},
      {"{" + a + ", " + a + "}", 8, "x: tensor \"a\" appears twice in the header"},
      {R"({"__metadata__": {"k": "v"}, "__metadata__": {}})", 0, "x: \"__metadata__\" appears twice in the header"},
      {R"({"__metadata__": ["v"]})", 0, "x: __metadata__: expected an object of strings, got an array"},
      {R"({"__metadata__": {"k": 1}})", 0, "x: __metadata__: \"k\": expected a string, got 1"},
      {R"({"__metadata__": {"k": "1", "k": "2"}})", 0, "x: __metadata__: key \"k\" appears twice"},
      {R"({"a": [0, 8]})", 8, "x: tensor \"a\": expected an object {dtype, shape, data_offsets}, got an array"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "strides": [1]}})", 8,
       "x: tensor \"a\": unknown key \"strides\" (known: dtype, shape, data_offsets)"},
      {R"({"a": {"shape": [2], "data_offsets": [0, 8]}})", 8, "x: tensor \"a\": dtype: required"},
      {R"({"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": unknown dtype \"F4\" (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, "
       "F32, F64, I64, U64)"},
      {R"({"a": {"dtype": 4, "shape": [2], "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": unknown dtype 4 (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, "
       "F64, I64, U64)"},
      {R"({"a": {"dtype": "F32", "data_offsets": [0, 8]}})", 8, "x: tensor \"a\": shape: required"},
      {R"({"a": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": shape: expected an array of dimensions, got 2"},
      {R"({"a": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": shape[1]: expected an integer in [0, 4611686018427387904], got -1"},
      {R"({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": shape[0]: expected an integer in [0, 4611686018427387904], got 2"},
      {R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8,
       "x: tensor \"a\": shape [4294967296, 4294967296] has too many elements"},
      {R"({"a": {"dtype": "F32", "shape": [2]}})", 8, "x: tensor \"a\": data_offsets: required"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4, 8]}})", 8,
       "x: tensor \"a\": data_offsets: expected [BEGIN, END], got an array of 3 values"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": "0-8"}})", 8,
       "x: tensor \"a\": data_offsets: expected [BEGIN, END], got \"0-8\""},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]}})", 8,
       "x: tensor \"a\": data_offsets[1]: expected an integer in [0, 9223372036854775808], got 18446744073709551616"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8,
       "x: tensor \"a\": data_offsets [8, 0]: begins after it ends"},
      {R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})", 16,
       "x: tensor \"a\": data_offsets [0, 12] hold 12 bytes, but F32 [2, 2] takes 16"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
       "x: tensor \"a\": data_offsets [0, 8] run past the end of the data buffer (4 bytes)"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 16,
       "x: tensor \"b\" at [8, 16] overlaps tensor \"a\" at [0, 16]"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})", 16,
       "x: tensor \"e\" at [4, 4] overlaps tensor \"a\" at [0, 16]"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})", 16,
       "x: bytes [8, 12) of the data buffer belong to no tensor (a gap before tensor \"b\")"},
      {R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
       "x: bytes [0, 4) of the data buffer belong to no tensor (a gap before tensor \"b\")"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 12,
       "x: the data buffer has 4 bytes after the last tensor, \"a\" (the tensors must cover it exactly)"},
      {"{}", 3, "x: the data buffer has 3 bytes after the header, but no tensors (the tensors must cover it exactly)"},
  };
  for (size_t i = 1; i < cases.size(); ++i) {
    const auto& [header, data, message] = cases[i];
    auto layout = ParseSafetensors(Bytes(File(header, data)), "x");
    ASSERT_FALSE(layout.ok()) << header;
    EXPECT_EQ(layout.status().message(), message) << header;
  }
  EXPECT_TRUE(ParseSafetensors(Bytes(File("{" + a + "}", 8)), "x").ok());
  EXPECT_TRUE(ParseSafetensors(Bytes(File("{}", 0)), "x").ok());  // no tensors is a valid file
}

TEST(SafetensorsFormat, RefusesHeaderLengthsTheFileCannotHold) {
  EXPECT_EQ(ParseSafetensors(Bytes("abc"), "x").status().message(),
            "x: truncated: 3 bytes, the header length alone takes 8");
  std::string huge;
  AppendLittleEndian(&huge, (uint64_t{100} << 20) + 1, 8);
  EXPECT_EQ(ParseSafetensors(Bytes(huge + "{}"), "x").status().message(),
            "x: header length 104857601 is over the limit of 104857600 bytes (100 MiB)");
  std::string past;
  AppendLittleEndian(&past, 40, 8);
  EXPECT_EQ(ParseSafetensors(Bytes(past + "{}"), "x").status().message(),
            "x: header length 40 runs past the end of the file (2 bytes after the length field)");
  std::string max;
  AppendLittleEndian(&max, ~uint64_t{0}, 8);
  EXPECT_EQ(ParseSafetensors(Bytes(max + "{}"), "x").status().message(),
            "x: header length 18446744073709551615 is over the limit of 104857600 bytes (100 MiB)");
  std::string zero;
  AppendLittleEndian(&zero, 0, 8);
  EXPECT_EQ(ParseSafetensors(Bytes(zero), "x").status().message(),
            "x: the header must be a JSON object starting with '{'");
}

TEST(SafetensorsFormat, TheWriterRefusesWhatItCouldNotWriteFaithfully) {
  const std::string eight(8, '\0');
  auto refuse = [](std::vector<TensorToWrite> t, std::vector<std::pair<std::string, std::string>> m = {}) {
    return SerializeSafetensors(t, m).status().message();
  };
  EXPECT_EQ(refuse({{"w", SafetensorsDtype::kF32, {3}, Bytes(eight)}}),
            "tensor \"w\": 8 bytes given, F32 [3] takes 12");
  EXPECT_EQ(refuse({{"w", SafetensorsDtype::kF32, {2}, Bytes(eight)}, {"w", SafetensorsDtype::kI32, {2}, Bytes(eight)}}),
            "tensor \"w\" is given twice");
  EXPECT_EQ(refuse({{"__metadata__", SafetensorsDtype::kF32, {2}, Bytes(eight)}}),
            "tensor \"__metadata__\": the name is reserved for the metadata");
  EXPECT_EQ(refuse({{"w\xff", SafetensorsDtype::kF32, {2}, Bytes(eight)}}), "tensor \"w\xef\xbf\xbd\": the name is not UTF-8");
  EXPECT_EQ(refuse({}, {{"k", "a"}, {"k", "b"}}), "__metadata__: key \"k\" is given twice");
}

}  // namespace
}  // namespace pipecoord::data
