#include "cli/json_keys.h"

#include <gtest/gtest.h>

#include <string>

namespace pipecoord::cli {
namespace {

std::string Check(const std::string& json, const JsonKeyOptions& o = {}) {
  Status st = CheckJsonKeys(json, o);
  return st.ok() ? "ok" : st.message();
}

TEST(JsonKeysTest, ValidDocumentsPass) {
  EXPECT_EQ(Check(R"({"name": "x", "pp": 2, "learningRate": 1e-3, "model": {"layers": 4, "seed": "3"},
                     "stageLayers": [3, 1], "costs": {}, "health": {"disabled": true, "probesOff": false},
                     "list": [[], [{}], null, -0.5, 0, 12.25E+2, "a\"b\\c\u00e9\ud83d\ude00"]})"),
            "ok");
  EXPECT_EQ(Check("  {}\n"), "ok");
  // The same key in different objects is no duplicate.
  EXPECT_EQ(Check(R"({"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]})"), "ok");
}

TEST(JsonKeysTest, DuplicateKeysAtAnyDepth) {
  EXPECT_EQ(Check("{\n  \"learningRate\": 0.1,\n  \"pp\": 2,\n  \"learningRate\": 5\n}"),
            "duplicate key \"learningRate\" in spec (line 4, first on line 2)");
  EXPECT_EQ(Check("{\"model\": {\"hidden\": 32,\n\"hidden\": 64}}"),
            "duplicate key \"hidden\" in spec.model (line 2, first on line 1)");
  EXPECT_EQ(Check(R"({"a": [{"k": 1}, {"k": 1, "k": 2}]})"), "duplicate key \"k\" in spec.a[1] (line 1, first on line 1)");
  // protobuf reads a field's proto name and its JSON name as the same field.
  EXPECT_EQ(Check("{\"learningRate\": 1,\n\"learning_rate\": 2}"),
            "duplicate key \"learning_rate\" in spec (line 2, the same field as \"learningRate\" on line 1)");
  // Escapes are decoded before keys are compared: "\u0070p" is "pp".
  EXPECT_EQ(Check(R"({"pp": 1, "\u0070p": 2})"), "duplicate key \"pp\" in spec (line 1, first on line 1)");
  JsonKeyOptions plain;
  plain.root = "doc";
  plain.proto_field_names = false;
  EXPECT_EQ(Check(R"({"a_b": 1, "aB": 2})", plain), "ok");
  EXPECT_EQ(Check(R"({"a_b": 1, "a_b": 2})", plain), "duplicate key \"a_b\" in doc (line 1, first on line 1)");
}

TEST(JsonKeysTest, MalformedInputIsRefusedNotCrashed) {
  EXPECT_EQ(Check(""), "not JSON: line 1, column 1: expected a value for spec, got the end of the text");
  EXPECT_EQ(Check("{\"pp\": 2,\n \"dp\" 1}"),
            "not JSON: line 2, column 7: expected ':' after the key \"dp\" in spec, got '1'");
  EXPECT_EQ(Check("{\"model\": {\"layers\": 4 \"hidden\": 3}}"),
            "not JSON: line 1, column 24: expected ',' or '}' after a member of spec.model, got '\"'");
  EXPECT_EQ(Check("{\"pp\": 2,}"), "not JSON: line 1, column 10: expected a key (a string in double quotes) in spec, got '}'");
  EXPECT_EQ(Check("{\"stageLayers\": [1, 2"), "not JSON: line 1, column 22: expected ',' or ']' after an element of spec.stageLayers, got the end of the text");
  EXPECT_EQ(Check("{\"pp\": tru}"), "not JSON: line 1, column 8: expected a value for spec.pp, got 't'");
  EXPECT_EQ(Check("{\"pp\": -}"), "not JSON: line 1, column 9: expected a digit in the number for spec.pp, got '}'");
  EXPECT_EQ(Check("{\"lr\": 1.}"), "not JSON: line 1, column 10: expected a digit after the decimal point in the number for spec.lr, got '}'");
  EXPECT_EQ(Check("{\"lr\": 1e}"), "not JSON: line 1, column 10: expected a digit in the exponent of the number for spec.lr, got '}'");
  EXPECT_EQ(Check("{\"name\": \"abc"), "not JSON: line 1, column 14: expected '\"' to end the string, got the end of the text");
  EXPECT_EQ(Check("{\"name\": \"a\tb\"}"),
            "not JSON: line 1, column 12: expected a character of a string (a control character must be escaped), got byte 0x09");
  EXPECT_EQ(Check("{\"name\": \"\\x\"}"),
            "not JSON: line 1, column 12: expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u after '\\', got 'x'");
  EXPECT_EQ(Check("{\"name\": \"\\u12\"}"), "not JSON: line 1, column 13: expected four hex digits after \\u, got '1'");
  EXPECT_EQ(Check("{} {}"), "not JSON: line 1, column 4: expected the end of the text after the document, got '{'");
  EXPECT_EQ(Check("{'pp': 2}"), "not JSON: line 1, column 2: expected a key (a string in double quotes) in spec, got '''");
  EXPECT_EQ(Check(std::string("{\"a\": \xff}")), "not JSON: line 1, column 7: expected a value for spec.a, got byte 0xff");
  // Deep nesting is refused, not a stack overflow.
  EXPECT_EQ(Check(std::string(100000, '[')),
            "not JSON: line 1, column 101: objects and arrays nested deeper than 100 levels, got '['");
  EXPECT_EQ(Check(std::string(100, '[') + std::string(100, ']')), "ok");
  // Every prefix of a valid document is refused with a message, never a crash.
  const std::string doc = R"({"a": [1, -2.5e3, true, null, {"b": "c\u00e9"}], "d": {}})";
  for (size_t n = 0; n < doc.size(); ++n) {
    EXPECT_EQ(Check(doc.substr(0, n)).rfind("not JSON: line 1, column ", 0), 0u) << doc.substr(0, n);
  }
}

}  // namespace
}  // namespace pipecoord::cli
