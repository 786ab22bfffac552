#include "common/json_writer.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include <gtest/gtest.h>

namespace pipecoord {
namespace {

TEST(JsonStringTest, EscapesQuotesBackslashesAndEveryControlCharacter) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("plain / text"), "\"plain / text\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(JsonString(std::string_view("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\\u007f\"");
  // Every byte below 0x20 comes out escaped, none raw.
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = JsonString(std::string(1, static_cast<char>(c)));
    for (char ch : out) EXPECT_GE(static_cast<unsigned char>(ch), 0x20) << "byte " << c;
  }
  // '<', '>', '&' and U+2028 stay as they are in the standard form.
  EXPECT_EQ(JsonString("<a&b>\u2028"), "\"<a&b>\u2028\"");
}

TEST(JsonStringTest, WellFormedUtf8PassesThrough) {
  // 2-, 3- and 4-byte sequences, and the edges of Table 3-7.
  EXPECT_EQ(JsonString("é ☃ 𝄞"), "\"é ☃ 𝄞\"");
  EXPECT_EQ(JsonString("\xC2\x80\xDF\xBF"), "\"\xC2\x80\xDF\xBF\"");                  // U+0080, U+07FF
  EXPECT_EQ(JsonString("\xE0\xA0\x80\xED\x9F\xBF"), "\"\xE0\xA0\x80\xED\x9F\xBF\"");  // U+0800, U+D7FF
  EXPECT_EQ(JsonString("\xEE\x80\x80\xEF\xBF\xBF"), "\"\xEE\x80\x80\xEF\xBF\xBF\"");  // U+E000, U+FFFF
  EXPECT_EQ(JsonString("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"), "\"\xF0\x90\x80\x80\xF4\x8F\xBF\xBF\"");
}

TEST(JsonStringTest, IllFormedUtf8BecomesOneReplacementPerMaximalSubpart) {
  EXPECT_EQ(JsonString("a\x80z"), "\"a\xEF\xBF\xBDz\"");                 // lone continuation byte
  EXPECT_EQ(JsonString("\xC0\xAF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");           // C0 is never a lead byte
  EXPECT_EQ(JsonString("\xC1\xBF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("\xE0\x80\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong: E0 then 80 is out of range
  EXPECT_EQ(JsonString("\xED\xA0\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // encoded surrogate U+D800
  EXPECT_EQ(JsonString("\xF4\x90\x80\x80"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // above U+10FFFF
  EXPECT_EQ(JsonString("\xF5\xFF"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");
  EXPECT_EQ(JsonString("\xE2\x98"), "\"\xEF\xBF\xBD\"");        // truncated at the end: one
  EXPECT_EQ(JsonString("\xE2\x98z"), "\"\xEF\xBF\xBDz\"");      // truncated before ASCII: one, then z
  EXPECT_EQ(JsonString("\xF0\x9D\x84"), "\"\xEF\xBF\xBD\"");    // 3 of 4 bytes
  EXPECT_EQ(JsonString("\xF0\x9D\x84\xF0\x9D\x84\x9E"), "\"\xEF\xBF\xBD\xF0\x9D\x84\x9E\"");
  EXPECT_EQ(JsonString("\xE2\x98\"\n"), "\"\xEF\xBF\xBD\\\"\\n\"");  // resumes at the quote
}

TEST(JsonStringTest, HtmlSafeAlsoEscapesMarkupAndLineSeparators) {
  EXPECT_EQ(JsonString("</script><a href=\"x\">&amp;", JsonEscape::kHtmlSafe),
            "\"\\u003c/script\\u003e\\u003ca href=\\\"x\\\"\\u003e\\u0026amp;\"");
  EXPECT_EQ(JsonString("a\u2028b\u2029c\u2027", JsonEscape::kHtmlSafe), "\"a\\u2028b\\u2029c\u2027\"");
  EXPECT_EQ(JsonString("\n\x01\xff", JsonEscape::kHtmlSafe), "\"\\n\\u0001\xEF\xBF\xBD\"");
}

TEST(JsonStringTest, AppendAddsToTheEnd) {
  std::string out = "x=";
  AppendJsonString(&out, "a\tb");
  EXPECT_EQ(out, "x=\"a\\tb\"");
}

TEST(JsonNumberTest, ShortestRoundTripNullForNonFinite) {
  EXPECT_EQ(JsonNumber(0), "0");
  EXPECT_EQ(JsonNumber(-0.0), "0");
  EXPECT_EQ(JsonNumber(9), "9");
  EXPECT_EQ(JsonNumber(-3), "-3");
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(JsonNumber(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(JsonNumber(1e20), "1e+20");
  EXPECT_EQ(JsonNumber(1.5e-7), "1.5e-07");
  EXPECT_EQ(JsonNumber(123456789.125), "123456789.125");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::denorm_min()), "5e-324");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(std::nan("")), "null");
  for (double v : {0.1, 2.0 / 3, 1e-300, 6.02214076e23, 1234.5678e-3, -7.25}) {
    EXPECT_EQ(std::strtod(JsonNumber(v).c_str(), nullptr), v) << JsonNumber(v);
  }
}

TEST(JsonNumberTest, IntegersAreExact) {
  EXPECT_EQ(JsonInt(0), "0");
  EXPECT_EQ(JsonInt(-42), "-42");
  EXPECT_EQ(JsonInt(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(JsonInt(std::numeric_limits<int64_t>::min()), "-9223372036854775808");
  EXPECT_EQ(JsonUint(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  // 2^53 + 1 has no double: JsonInt keeps it, JsonNumber could not.
  EXPECT_EQ(JsonInt(9007199254740993), "9007199254740993");
}

TEST(JsonWriterTest, SpacedObjectsArraysAndEveryValueKind) {
  JsonWriter w;
  w.BeginObject()
      .Key("s").String("a\"b")
      .Key("i").Int(-7)
      .Key("u").Uint(18446744073709551615u)
      .Key("d").Number(0.25)
      .Key("nan").Number(std::nan(""))
      .Key("t").Bool(true)
      .Key("f").Bool(false)
      .Key("n").Null()
      .Key("raw").Raw("{\"x\": 1}")
      .Key("empty_a").BeginArray().EndArray()
      .Key("empty_o").BeginObject().EndObject()
      .Key("a").BeginArray().Int(1).String("two").BeginArray().Int(3).EndArray().EndArray()
      .EndObject();
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(w.text(),
            "{\"s\": \"a\\\"b\", \"i\": -7, \"u\": 18446744073709551615, \"d\": 0.25, \"nan\": null, "
            "\"t\": true, \"f\": false, \"n\": null, \"raw\": {\"x\": 1}, \"empty_a\": [], \"empty_o\": {}, "
            "\"a\": [1, \"two\", [3]]}");
}

TEST(JsonWriterTest, CompactStyleAndHtmlSafeKeysAndValues) {
  JsonWriter w(JsonWriter::Style::kCompact, JsonEscape::kHtmlSafe);
  w.BeginObject().Key("<k>").String("a&b").Key("l").BeginArray().Int(1).Int(2).EndArray().EndObject();
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w.text(), "{\"\\u003ck\\u003e\":\"a\\u0026b\",\"l\":[1,2]}");
}

TEST(JsonWriterTest, BreaksPutOneElementPerLine) {
  JsonWriter w;
  w.BeginObject().Key("a").Int(1).Break("\n ").Key("b").BeginArray();
  for (int i = 0; i < 2; ++i) w.Break("\n  ").BeginObject().Key("i").Int(i).EndObject();
  w.Break("\n ").EndArray().EndObject();
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w.Take(), "{\"a\": 1,\n \"b\": [\n  {\"i\": 0},\n  {\"i\": 1}\n ]}");
  EXPECT_EQ(w.text(), "");  // taken
  w.BeginArray().Break("\n").EndArray();  // the writer is reusable, empty array with a break
  EXPECT_EQ(w.Take(), "[\n]");
  EXPECT_TRUE(w.ok());
}

TEST(JsonWriterTest, MisuseIsReported) {
  {
    JsonWriter w;
    w.BeginObject().Int(1);
    EXPECT_FALSE(w.ok());
    EXPECT_EQ(w.error(), "Int() inside an object without a Key() before it");
  }
  {
    JsonWriter w;
    w.BeginArray().Key("k");
    EXPECT_EQ(w.error(), "Key(\"k\") outside an object");
  }
  {
    JsonWriter w;
    w.BeginObject().Key("a").Key("b");
    EXPECT_EQ(w.error(), "Key(\"b\") right after another key");
  }
  {
    JsonWriter w;
    w.BeginObject().Key("a").EndObject();
    EXPECT_EQ(w.error(), "EndObject() right after a key, before its value");
  }
  {
    JsonWriter w;
    w.BeginArray().EndObject();
    EXPECT_EQ(w.error(), "EndObject() closes an array");
  }
  {
    JsonWriter w;
    w.EndArray();
    EXPECT_EQ(w.error(), "EndArray() with nothing open");
  }
  {
    JsonWriter w;
    w.Int(1).Int(2);
    EXPECT_EQ(w.error(), "Int() after the top-level value was complete");
  }
  {
    JsonWriter w;
    w.BeginArray().BeginObject();
    EXPECT_FALSE(w.complete());
    w.Take();
    EXPECT_EQ(w.error(), "Take() with 2 container(s) still open");
  }
  {
    JsonWriter w;
    w.String("x");
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE(w.complete());
  }
}

}  // namespace
}  // namespace pipecoord
