#include "cli/json_keys.h"

#include <cstdio>
#include <map>
#include <utility>

namespace pipecoord::cli {
namespace {

// protobuf's JSON name of a proto field name: underscores dropped, the letter after each one
// upper-cased ("learning_rate" -> "learningRate"); a JSON name maps to itself.
std::string ProtoJsonName(const std::string& key) {
  std::string out;
  bool upper = false;
  for (char c : key) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return out;
}

void AppendUtf8(unsigned cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Scanner {
 public:
  Scanner(std::string_view text, const JsonKeyOptions& options) : s_(text), o_(options) {}

  Status Run() {
    PIPECOORD_RETURN_IF_ERROR(Value(o_.root, 0));
    SkipSpace();
    if (i_ < s_.size()) return Error("expected the end of the text after the document");
    return Status::Ok();
  }

 private:
  bool AtEnd() const { return i_ >= s_.size(); }

  void SkipSpace() {
    while (!AtEnd()) {
      const char c = s_[i_];
      if (c == '\n') {
        ++line_;
        line_start_ = i_ + 1;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        return;
      }
      ++i_;
    }
  }

  // What stands at the current position, for messages.
  std::string Found() const {
    if (AtEnd()) return "the end of the text";
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    char buf[16];
    if (c >= 0x21 && c < 0x7f) {
      std::snprintf(buf, sizeof buf, "'%c'", c);
    } else {
      std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    }
    return buf;
  }

  Status Error(const std::string& what) const {
    return InvalidArgument("not JSON: line " + std::to_string(line_) + ", column " +
                           std::to_string(i_ - line_start_ + 1) + ": " + what + ", got " + Found());
  }

  Status Value(const std::string& path, int depth) {
    SkipSpace();
    if (AtEnd()) return Error("expected a value for " + path);
    switch (s_[i_]) {
      case '{': return Object(path, depth + 1);
      case '[': return Array(path, depth + 1);
      case '"': {
        std::string ignored;
        return String(&ignored);
      }
      case 't': return Literal("true", path);
      case 'f': return Literal("false", path);
      case 'n': return Literal("null", path);
      default:
        if (s_[i_] == '-' || (s_[i_] >= '0' && s_[i_] <= '9')) return Number(path);
        return Error("expected a value for " + path);
    }
  }

  Status Object(const std::string& path, int depth) {
    if (depth > o_.max_depth) return Error("objects and arrays nested deeper than " + std::to_string(o_.max_depth) + " levels");
    ++i_;  // '{'
    SkipSpace();
    if (!AtEnd() && s_[i_] == '}') {
      ++i_;
      return Status::Ok();
    }
    std::map<std::string, std::pair<std::string, int>> seen;  // field -> (key as written, line)
    for (;;) {
      SkipSpace();
      if (AtEnd() || s_[i_] != '"') return Error("expected a key (a string in double quotes) in " + path);
      const int line = line_;
      std::string key;
      PIPECOORD_RETURN_IF_ERROR(String(&key));
      const std::string field = o_.proto_field_names ? ProtoJsonName(key) : key;
      auto [it, fresh] = seen.try_emplace(field, key, line);
      if (!fresh) {
        const auto& [first_key, first_line] = it->second;
        const std::string where = "duplicate key \"" + key + "\" in " + path + " (line " + std::to_string(line);
        if (first_key == key) return InvalidArgument(where + ", first on line " + std::to_string(first_line) + ")");
        return InvalidArgument(where + ", the same field as \"" + first_key + "\" on line " +
                               std::to_string(first_line) + ")");
      }
      SkipSpace();
      if (AtEnd() || s_[i_] != ':') return Error("expected ':' after the key \"" + key + "\" in " + path);
      ++i_;
      PIPECOORD_RETURN_IF_ERROR(Value(path + "." + key, depth));
      SkipSpace();
      if (!AtEnd() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!AtEnd() && s_[i_] == '}') {
        ++i_;
        return Status::Ok();
      }
      return Error("expected ',' or '}' after a member of " + path);
    }
  }

  Status Array(const std::string& path, int depth) {
    if (depth > o_.max_depth) return Error("objects and arrays nested deeper than " + std::to_string(o_.max_depth) + " levels");
    ++i_;  // '['
    SkipSpace();
    if (!AtEnd() && s_[i_] == ']') {
      ++i_;
      return Status::Ok();
    }
    for (size_t n = 0;; ++n) {
      PIPECOORD_RETURN_IF_ERROR(Value(path + "[" + std::to_string(n) + "]", depth));
      SkipSpace();
      if (!AtEnd() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!AtEnd() && s_[i_] == ']') {
        ++i_;
        return Status::Ok();
      }
      return Error("expected ',' or ']' after an element of " + path);
    }
  }

  // Four hex digits at the current position.
  bool Hex4(unsigned* out) {
    if (s_.size() - i_ < 4) return false;
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_ + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    i_ += 4;
    *out = v;
    return true;
  }

  // A string at the current '"', decoded into *out.
  Status String(std::string* out) {
    ++i_;  // '"'
    for (;;) {
      if (AtEnd()) return Error("expected '\"' to end the string");
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return Status::Ok();
      }
      if (c < 0x20) return Error("expected a character of a string (a control character must be escaped)");
      if (c != '\\') {
        *out += static_cast<char>(c);
        ++i_;
        continue;
      }
      ++i_;
      if (AtEnd()) return Error("expected an escape after '\\'");
      const char e = s_[i_++];
      switch (e) {
        case '"': *out += '"'; break;
        case '\\': *out += '\\'; break;
        case '/': *out += '/'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'u': {
          unsigned cp;
          if (!Hex4(&cp)) return Error("expected four hex digits after \\u");
          // A surrogate pair is one character; a lone surrogate is kept as its own code.
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(i_, 2) == "\\u") {
            const size_t back = i_;
            i_ += 2;
            unsigned low;
            if (Hex4(&low) && low >= 0xDC00 && low < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              i_ = back;
            }
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          --i_;
          return Error("expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u after '\\'");
      }
    }
  }

  Status Number(const std::string& path) {
    auto digits = [&] {
      const size_t from = i_;
      while (!AtEnd() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > from;
    };
    if (s_[i_] == '-') ++i_;
    if (!AtEnd() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return Error("expected a digit in the number for " + path);
    }
    if (!AtEnd() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return Error("expected a digit after the decimal point in the number for " + path);
    }
    if (!AtEnd() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (!AtEnd() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return Error("expected a digit in the exponent of the number for " + path);
    }
    return Status::Ok();
  }

  Status Literal(std::string_view word, const std::string& path) {
    if (s_.substr(i_, word.size()) != word) return Error("expected a value for " + path);
    i_ += word.size();
    return Status::Ok();
  }

  std::string_view s_;
  const JsonKeyOptions& o_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

Status CheckJsonKeys(std::string_view json, const JsonKeyOptions& options) {
  return Scanner(json, options).Run();
}

}  // namespace pipecoord::cli
