#include "memory/json.h"

#include <gtest/gtest.h>

#include <random>

#include "common/json_writer.h"

namespace pipecoord::memory {
namespace {

TEST(JsonTest, ParsesEveryKind) {
  auto v = ParseJson(R"( {"a": [1, -2.5e3, true, false, null], "b": {"c": "x\"\u00e9\ud83d\ude00"},
                         "big": 9007199254740993} )");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 5u);
  EXPECT_TRUE(a->items[0].is_integer);
  EXPECT_EQ(a->items[0].integer, 1);
  EXPECT_FALSE(a->items[1].is_integer);
  EXPECT_DOUBLE_EQ(a->items[1].number, -2500);
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(a->items[4].type, JsonValue::Type::kNull);
  EXPECT_EQ(v->Find("b")->Find("c")->string, "x\"\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(v->Find("big")->integer, 9007199254740993);  // exact, beyond double precision
  EXPECT_EQ(v->Find("nope"), nullptr);
}

TEST(JsonTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ParseJson("{\"a\": 1,\n \"b\" 2}").status().message(),
            "line 2, column 6: expected ':' after a member name");
  EXPECT_EQ(ParseJson("[1, 2").status().message(), "line 1, column 6: expected ',' or ']' after an array element");
  EXPECT_EQ(ParseJson("[1] x").status().message(), "line 1, column 5: unexpected text after the JSON value");
  EXPECT_EQ(ParseJson("\"a\nb\"").status().message(),
            "line 1, column 3: control character inside a string (escape it)");
  EXPECT_EQ(ParseJson("01").status().message(), "line 1, column 2: unexpected text after the JSON value");
  EXPECT_EQ(ParseJson("1e999").status().message(), "line 1, column 6: number out of range");
  EXPECT_EQ(ParseJson("\"\\ud800\"").status().message(), "line 1, column 8: unpaired UTF-16 surrogate");
  EXPECT_FALSE(ParseJson("").ok());
  EXPECT_FALSE(ParseJson("nul").ok());
}

TEST(JsonTest, DepthIsBounded) {
  std::string deep(kMaxJsonDepth + 1, '[');
  EXPECT_NE(ParseJson(deep).status().message().find("nesting deeper than 64 levels"), std::string::npos);
  std::string ok(kMaxJsonDepth - 1, '[');
  ok += std::string(kMaxJsonDepth - 1, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
}

TEST(JsonTest, GarbageNeverCrashes) {
  // A small in-test fuzz loop: mutations of a valid document must parse or fail cleanly.
  const std::string seed = R"({"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [2, 3]}]}]}]})";
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":,0123456789-+.eE\\u tfnrl\x01\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1);
          break;
        default:
          if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()];
          break;
      }
    }
    auto r = ParseJson(s);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

// The project's one writer (common/json_writer.h) and this reader agree: what one writes the
// other reads back unchanged (ill-formed UTF-8 as U+FFFD, the writer's documented rule).
TEST(JsonTest, ReadsBackWhatTheCommonWriterWrites) {
  for (const std::string& s : {std::string("a\"b\\c\n\x01"), std::string("\b\f\x7f/<&>"), std::string("\xc3\xa9 \xe2\x98\x83 \xf0\x9d\x84\x9e"),
                              std::string("\0x", 2)}) {
    auto r = ParseJson(JsonString(s));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->string, s);
  }
  auto bad = ParseJson(JsonString("a\xffz"));
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->string, "a\xef\xbf\xbdz");
  for (double v : {0.1, 1.0 / 3, 1e20, -7.25, 5e-324, 1.7976931348623157e308}) {
    auto r = ParseJson(JsonNumber(v));
    ASSERT_TRUE(r.ok()) << JsonNumber(v);
    EXPECT_EQ(r->number, v) << JsonNumber(v);
  }
  auto big = ParseJson(JsonInt(9007199254740993));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->integer, 9007199254740993);
}

// JSON text is UTF-8: a string holding other bytes is refused, naming where.
TEST(JsonTest, BytesThatAreNotUtf8AreRefused) {
  auto bad = ParseJson("{\"a\": \"z\xde\"}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "line 1, column 9: a string holds bytes that are not UTF-8");
  auto good = ParseJson("\"\xc3\xa9t\xc3\xa9\"");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(good->string, "\xc3\xa9t\xc3\xa9");
}

// Any bytes at all come out as a JSON string this reader accepts, the same again when written
// back; ASCII comes back unchanged.
TEST(JsonTest, CommonWriterOutputAlwaysParses) {
  std::mt19937 rng(7);
  for (int n = 0; n < 5000; ++n) {
    std::string s(rng() % 12, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 0x20 : rng() % 256);
    auto r = ParseJson(JsonString(s));
    ASSERT_TRUE(r.ok()) << JsonString(s) << ": " << r.status().ToString();
    // Writing what was read back gives the same text (found by fuzz/memory_program_fuzz: an
    // invalid byte became "\ufffd" the first time and the raw U+FFFD the second).
    EXPECT_EQ(JsonString(r->string), JsonString(s));
    bool ascii = true;
    for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) {
      EXPECT_EQ(r->string, s);
    }
  }
}

}  // namespace
}  // namespace pipecoord::memory
