#include "memory/formula.h"

#include <string>

namespace pipecoord::memory {
namespace {

class Evaluator {
 public:
  Evaluator(std::string_view text, const ShapeVars& vars) : text_(text), vars_(vars) {}

  Result<int64_t> Run() {
    int64_t v = 0;
    if (!Sum(&v)) return Fail();
    Skip();
    if (pos_ != text_.size()) {
      Error(std::string("unexpected '") + text_[pos_] + "'");
      return Fail();
    }
    return v;
  }

 private:
  Status Fail() const {
    return InvalidArgument("shape formula \"" + std::string(text_) + "\": " + error_);
  }
  bool Error(const std::string& what) {
    if (error_.empty()) error_ = what;
    return false;
  }
  void Skip() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }

  bool Sum(int64_t* out) {
    if (!Product(out)) return false;
    while (true) {
      Skip();
      if (pos_ >= text_.size() || (text_[pos_] != '+' && text_[pos_] != '-')) return true;
      char op = text_[pos_++];
      int64_t rhs = 0;
      if (!Product(&rhs)) return false;
      bool overflow = op == '+' ? __builtin_add_overflow(*out, rhs, out)
                                : __builtin_sub_overflow(*out, rhs, out);
      if (overflow) return Error("overflows 64-bit integers");
    }
  }

  bool Product(int64_t* out) {
    if (!Atom(out)) return false;
    while (true) {
      Skip();
      if (pos_ >= text_.size() || (text_[pos_] != '*' && text_[pos_] != '/')) return true;
      char op = text_[pos_++];
      int64_t rhs = 0;
      if (!Atom(&rhs)) return false;
      if (op == '*') {
        if (__builtin_mul_overflow(*out, rhs, out)) return Error("overflows 64-bit integers");
      } else {
        if (rhs == 0) return Error("division by zero");
        if (*out % rhs != 0) {
          return Error("division leaves a remainder (" + std::to_string(*out) + " / " +
                       std::to_string(rhs) + ")");
        }
        *out /= rhs;
      }
    }
  }

  bool Atom(int64_t* out) {
    Skip();
    if (pos_ >= text_.size()) return Error("unexpected end");
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      if (++depth_ > 16) return Error("parentheses nested too deeply");
      if (!Sum(out)) return false;
      --depth_;
      Skip();
      if (pos_ >= text_.size() || text_[pos_] != ')') return Error("missing ')'");
      ++pos_;
      return true;
    }
    if (c >= '0' && c <= '9') {
      int64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text_[pos_] - '0', &v)) {
          return Error("number too large");
        }
        ++pos_;
      }
      *out = v;
      return true;
    }
    ++pos_;
    switch (c) {
      case 's': *out = vars_.s; return true;
      case 'b': *out = vars_.b; return true;
      case 'h': *out = vars_.h; return true;
      case 'f': *out = vars_.f; return true;
      case 'a': *out = vars_.a; return true;
      case 'g': *out = vars_.g; return true;
      case 'v': *out = vars_.v; return true;
      case 'd': *out = vars_.d; return true;
      default: return Error(std::string("unknown variable '") + c + "' (known: s b h f a g v d)");
    }
  }

  std::string_view text_;
  const ShapeVars& vars_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

}  // namespace

Result<int64_t> EvalFormula(std::string_view formula, const ShapeVars& vars) {
  if (formula.empty()) return InvalidArgument("shape formula: empty");
  return Evaluator(formula, vars).Run();
}

}  // namespace pipecoord::memory
