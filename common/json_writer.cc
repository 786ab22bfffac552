#include "common/json_writer.h"

#include <charconv>
#include <cmath>

namespace pipecoord {

size_t Utf8SequenceLength(std::string_view s, size_t i, size_t* bad) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong forms
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *bad = 1;  // a continuation byte alone, C0, C1, F5..FF
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      *bad = k;
      return 0;
    }
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    const bool fits = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!fits) {
      *bad = k;
      return 0;
    }
  }
  return len;
}
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendU00(std::string* out, unsigned char c) {
  *out += "\\u00";
  *out += kHex[c >> 4];
  *out += kHex[c & 0xf];
}


}  // namespace

void AppendJsonString(std::string* out, std::string_view s, JsonEscape escape) {
  const bool html = escape == JsonEscape::kHtmlSafe;
  out->reserve(out->size() + s.size() + 2);
  *out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\b': *out += "\\b"; break;
        case '\f': *out += "\\f"; break;
        case '\n': *out += "\\n"; break;
        case '\r': *out += "\\r"; break;
        case '\t': *out += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f || (html && (c == '<' || c == '>' || c == '&'))) {
            AppendU00(out, c);
          } else {
            *out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    size_t bad = 0;
    const size_t len = Utf8SequenceLength(s, i, &bad);
    if (len == 0) {
      *out += "\xEF\xBF\xBD";  // U+FFFD as UTF-8, as a well-formed one would pass: writing is idempotent
      i += bad;
      continue;
    }
    if (html && len == 3 && c == 0xE2 && s[i + 1] == '\x80' && (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
      *out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
    } else {
      out->append(s.substr(i, len));
    }
    i += len;
  }
  *out += '"';
}

std::string JsonString(std::string_view s, JsonEscape escape) {
  std::string out;
  AppendJsonString(&out, s, escape);
  return out;
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == 0) return "0";  // also -0
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  if (ec != std::errc()) return "null";                      // cannot happen with 64 bytes
  return std::string(buf, end);
}

std::string JsonInt(int64_t v) { return std::to_string(v); }
std::string JsonUint(uint64_t v) { return std::to_string(v); }

JsonWriter::JsonWriter(Style style, JsonEscape escape) : style_(style), escape_(escape) {}

void JsonWriter::Fail(std::string what) {
  if (error_.empty()) error_ = std::move(what);
}

void JsonWriter::BeforeValue(const char* what) {
  if (stack_.empty()) {
    if (wrote_root_) Fail(std::string(what) + " after the top-level value was complete");
    wrote_root_ = true;
    if (have_break_) out_ += pending_break_;
    have_break_ = false;
    return;
  }
  Frame& f = stack_.back();
  if (f.object && f.have_key) {  // the value of the key just written
    f.have_key = false;
    if (have_break_) out_ += pending_break_;
    have_break_ = false;
    return;
  }
  if (f.object) Fail(std::string(what) + " inside an object without a Key() before it");
  if (!f.empty) out_ += ',';
  if (have_break_) {
    out_ += pending_break_;
  } else if (!f.empty && style_ == Style::kSpaced) {
    out_ += ' ';
  }
  have_break_ = false;
  f.empty = false;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  if (stack_.empty() || !stack_.back().object) {
    Fail("Key(\"" + std::string(key) + "\") outside an object");
  } else if (stack_.back().have_key) {
    Fail("Key(\"" + std::string(key) + "\") right after another key");
  } else {
    Frame& f = stack_.back();
    if (!f.empty) out_ += ',';
    if (have_break_) {
      out_ += pending_break_;
    } else if (!f.empty && style_ == Style::kSpaced) {
      out_ += ' ';
    }
    have_break_ = false;
    f.empty = false;
    f.have_key = true;
  }
  AppendJsonString(&out_, key, escape_);
  out_ += style_ == Style::kSpaced ? ": " : ":";
  return *this;
}

void JsonWriter::Begin(bool object) {
  BeforeValue(object ? "BeginObject()" : "BeginArray()");
  out_ += object ? '{' : '[';
  stack_.push_back(Frame{object, true, false});
}

void JsonWriter::End(bool object) {
  const char* what = object ? "EndObject()" : "EndArray()";
  if (stack_.empty()) {
    Fail(std::string(what) + " with nothing open");
  } else if (stack_.back().object != object) {
    Fail(std::string(what) + " closes an " + (object ? "array" : "object"));
  } else if (stack_.back().have_key) {
    Fail(std::string(what) + " right after a key, before its value");
  }
  if (have_break_) out_ += pending_break_;
  have_break_ = false;
  out_ += object ? '}' : ']';
  if (!stack_.empty()) stack_.pop_back();
}

JsonWriter& JsonWriter::BeginObject() {
  Begin(true);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  End(true);
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Begin(false);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  End(false);
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view s) {
  BeforeValue("String()");
  AppendJsonString(&out_, s, escape_);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  BeforeValue("Int()");
  out_ += JsonInt(v);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t v) {
  BeforeValue("Uint()");
  out_ += JsonUint(v);
  return *this;
}

JsonWriter& JsonWriter::Number(double v) {
  BeforeValue("Number()");
  out_ += JsonNumber(v);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool v) {
  BeforeValue("Bool()");
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue("Null()");
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue("Raw()");
  out_.append(json);
  return *this;
}

JsonWriter& JsonWriter::Break(std::string_view whitespace) {
  pending_break_.assign(whitespace);
  have_break_ = true;
  return *this;
}

std::string JsonWriter::Take() {
  if (!stack_.empty()) Fail("Take() with " + std::to_string(stack_.size()) + " container(s) still open");
  std::string out = std::move(out_);
  out_.clear();
  stack_.clear();
  have_break_ = false;
  wrote_root_ = false;
  return out;
}

}  // namespace pipecoord
