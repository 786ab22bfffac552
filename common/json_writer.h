// The one JSON writer of the project: string escaping, number formatting and a small streaming
// writer for objects and arrays. Every JSON text pipecoord writes by hand (schedule exports,
// memory and plan reports, traces, the dashboard) goes through these, so they all follow the
// same rules:
//
// Strings (RFC 8259, section 7): '"' and '\' are escaped as \" and \\; the control characters
// with a short form as \b \f \n \r \t; every other byte below 0x20, and DEL (0x7f), as \u00XX
// (lower-case hex). Well-formed UTF-8 passes through unchanged. Bytes that are not well-formed
// UTF-8 (a stray continuation byte, a truncated or overlong sequence, an encoded surrogate, a
// code point above U+10FFFF) are replaced by U+FFFD (written as its UTF-8 bytes, as any
// well-formed character is, so writing what was read back gives the same text), one per maximal
// ill-formed subsequence (the Unicode "best practice"), so the output is always valid UTF-8 and
// therefore valid JSON.
// JsonEscape::kHtmlSafe also escapes '<', '>', '&' (\u003c \u003e \u0026), U+2028 and U+2029,
// so the text stays inert when embedded in an HTML page or a <script>.
//
// Numbers: integers (JsonInt, JsonUint) are written exactly in decimal. Doubles (JsonNumber)
// are written in the shortest form that reads back as exactly the same double (std::to_chars:
// "9", "0.1", "0.3333333333333333", "1e+20"); -0 is written "0". NaN and the infinities, which
// JSON cannot express, are written null: a reader sees "no value", never a wrong one.
#ifndef PIPECOORD_COMMON_JSON_WRITER_H_
#define PIPECOORD_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipecoord {

enum class JsonEscape {
  kStandard,  // RFC 8259 as above
  kHtmlSafe,  // also '<', '>', '&', U+2028, U+2029
};

// `s` as a quoted JSON string literal.
std::string JsonString(std::string_view s, JsonEscape escape = JsonEscape::kStandard);

// The length of the well-formed UTF-8 sequence starting at s[i] (Unicode Table 3-7), or 0 when
// it is ill-formed; then *bad is the length of its maximal ill-formed subpart (at least 1).
// Readers use it to refuse text that is not UTF-8 (RFC 8259 section 8.1).
size_t Utf8SequenceLength(std::string_view s, size_t i, size_t* bad);
// Appends JsonString(s, escape) to *out.
void AppendJsonString(std::string* out, std::string_view s, JsonEscape escape = JsonEscape::kStandard);

// Shortest round-trip text of `v`; "0" for -0; "null" for NaN and infinities.
std::string JsonNumber(double v);
std::string JsonInt(int64_t v);
std::string JsonUint(uint64_t v);

// A streaming writer. Values are written in order; inside an object each value follows a Key().
// Separators follow the style: kSpaced writes ", " between elements and ": " after a key,
// kCompact writes "," and ":". Break(ws) puts `ws` (a newline and indentation) before the next
// element or closing bracket instead of the space, for layouts with one element per line:
//
//   JsonWriter w;
//   w.BeginObject().Key("a").Int(1).Break("\n ").Key("b").BeginArray().String("x").EndArray()
//    .EndObject();
//   w.text() == "{\"a\": 1,\n \"b\": [\"x\"]}"
//
// Misuse (a value without a key in an object, a key outside one, an unmatched End, text taken
// before the last container is closed) is a bug of the caller: ok() turns false, error() says
// what happened first, and the text is not valid JSON.
class JsonWriter {
 public:
  enum class Style { kSpaced, kCompact };

  explicit JsonWriter(Style style = Style::kSpaced, JsonEscape escape = JsonEscape::kStandard);

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Number(double v);  // JsonNumber's rule
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  // A value that is already JSON text (e.g. from another writer); written as is.
  JsonWriter& Raw(std::string_view json);

  // Whitespace to write before the next element or closing bracket (see above).
  JsonWriter& Break(std::string_view whitespace);

  // True while every call so far was well placed.
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // True when one whole value has been written and every container is closed.
  bool complete() const { return stack_.empty() && wrote_root_; }

  const std::string& text() const { return out_; }
  // The text, moved out; the writer is empty afterwards.
  std::string Take();

 private:
  struct Frame {
    bool object = false;
    bool empty = true;
    bool have_key = false;  // objects: a key was written, its value is next
  };

  void BeforeValue(const char* what);
  void Begin(bool object);
  void End(bool object);
  void Fail(std::string what);

  Style style_;
  JsonEscape escape_;
  std::string out_;
  std::vector<Frame> stack_;
  std::string pending_break_;
  bool have_break_ = false;
  bool wrote_root_ = false;
  std::string error_;
};

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_JSON_WRITER_H_
