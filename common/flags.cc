#include "common/flags.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace pipecoord {
namespace {

bool ParseInt(const std::string& s, int* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < -2147483647L || v > 2147483647L) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) parts.push_back(item);
  if (!s.empty() && s.back() == ',') parts.push_back("");
  return parts;
}

constexpr size_t kHelpIndent = 26;
constexpr size_t kHelpWidth = 100;

// Word-wraps `text` to kHelpWidth columns; lines after the first start with `indent` spaces
// (the first is assumed to sit at column `indent` already).
std::string Wrap(const std::string& text, size_t indent) {
  std::string out;
  size_t column = indent;
  std::stringstream words(text);
  std::string word;
  while (words >> word) {
    if (column > indent && column + 1 + word.size() > kHelpWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
  }
  return out;
}

}  // namespace

std::string OneOf(const std::vector<std::string>& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

FlagSet::FlagSet(std::string usage, std::string summary)
    : usage_(std::move(usage)), summary_(std::move(summary)) {}

void FlagSet::String(const std::string& n, std::string* o, const std::string& h) { flags_.push_back({n, Kind::kString, o, h, false, {}}); }
void FlagSet::Int(const std::string& n, int* o, const std::string& h) { flags_.push_back({n, Kind::kInt, o, h, false, {}}); }
void FlagSet::Double(const std::string& n, double* o, const std::string& h) { flags_.push_back({n, Kind::kDouble, o, h, false, {}}); }
void FlagSet::Bool(const std::string& n, bool* o, const std::string& h) { flags_.push_back({n, Kind::kBool, o, h, false, {}}); }
void FlagSet::IntList(const std::string& n, std::vector<int>* o, const std::string& h) { flags_.push_back({n, Kind::kIntList, o, h, false, {}}); }
void FlagSet::DoubleList(const std::string& n, std::vector<double>* o, const std::string& h) { flags_.push_back({n, Kind::kDoubleList, o, h, false, {}}); }
void FlagSet::Choice(const std::string& n, std::string* o, std::vector<std::string> c, const std::string& h) {
  flags_.push_back({n, Kind::kChoice, o, h, false, std::move(c)});
}
void FlagSet::Format(std::string* o, std::vector<std::string> formats, const std::string& h) {
  Choice("format", o, std::move(formats), h);
}

Status FlagSet::Set(Flag& f, const std::string& value) {
  const std::string name = "--" + f.name;
  auto bad = [&](const char* what) {
    return InvalidArgument(name + ": expected " + what + ", got \"" + value + "\"");
  };
  switch (f.kind) {
    case Kind::kString:
      *static_cast<std::string*>(f.out) = value;
      break;
    case Kind::kChoice:
      if (std::find(f.choices.begin(), f.choices.end(), value) == f.choices.end()) {
        return InvalidArgument(name + ": must be " + OneOf(f.choices) + ", got \"" + value + "\"");
      }
      *static_cast<std::string*>(f.out) = value;
      break;
    case Kind::kInt:
      if (!ParseInt(value, static_cast<int*>(f.out))) return bad("an integer");
      break;
    case Kind::kDouble:
      if (!ParseDouble(value, static_cast<double*>(f.out))) return bad("a number");
      break;
    case Kind::kBool:
      if (value == "true" || value == "1") *static_cast<bool*>(f.out) = true;
      else if (value == "false" || value == "0") *static_cast<bool*>(f.out) = false;
      else return bad("true or false");
      break;
    case Kind::kIntList: {
      std::vector<int> v;
      for (const std::string& part : SplitCommas(value)) {
        int x;
        if (!ParseInt(part, &x)) return bad("comma-separated integers, e.g. 5,3");
        v.push_back(x);
      }
      *static_cast<std::vector<int>*>(f.out) = v;
      break;
    }
    case Kind::kDoubleList: {
      std::vector<double> v;
      for (const std::string& part : SplitCommas(value)) {
        double x;
        if (!ParseDouble(part, &x)) return bad("comma-separated numbers, e.g. 1.5,1,1");
        v.push_back(x);
      }
      *static_cast<std::vector<double>*>(f.out) = v;
      break;
    }
  }
  f.given = true;
  return Status::Ok();
}

Status FlagSet::Parse(int argc, char** argv, std::vector<std::string>* positional) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      if (positional == nullptr) return InvalidArgument("unexpected argument \"" + arg + "\"");
      positional->push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    Flag* flag = nullptr;
    for (Flag& f : flags_) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) return InvalidArgument("--" + name + ": unknown option (see --help)");
    if (!has_value) {
      if (flag->kind == Kind::kBool) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return InvalidArgument("--" + name + ": needs a value");
      }
    }
    PIPECOORD_RETURN_IF_ERROR(Set(*flag, value));
  }
  return Status::Ok();
}

bool FlagSet::Given(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.given;
  }
  return false;
}

std::string FlagSet::Help() const {
  std::string out = "usage: " + usage_ + "\n\n" + Wrap(summary_, 0) + "\n\noptions:\n";
  for (const Flag& f : flags_) {
    std::string left = "  --" + f.name;
    if (f.kind != Kind::kBool) left += " VALUE";
    if (left.size() < kHelpIndent) left.resize(kHelpIndent, ' ');
    else left += "\n" + std::string(kHelpIndent, ' ');
    out += left + Wrap(f.help, kHelpIndent) + "\n";
  }
  out += "  -h, --help              show this help\n";
  return out;
}

}  // namespace pipecoord
