// FlagSet: the options of one pipectl verb, parsed from argv, with a --help text made from the
// same declarations so the two never disagree.
#ifndef PIPECOORD_COMMON_FLAGS_H_
#define PIPECOORD_COMMON_FLAGS_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord {

// "a", "a or b", "a, b or c": the choices of a flag, for its messages.
std::string OneOf(const std::vector<std::string>& choices);

class FlagSet {
 public:
  // usage: "pipectl schedule --schedule NAME --pp P ..."; summary: one paragraph (Help() wraps
  // it and each flag's help at 100 columns).
  FlagSet(std::string usage, std::string summary);

  // Each flag is --name VALUE or --name=VALUE; a bool flag takes no value. `help` should say
  // the unit and the default.
  void String(const std::string& name, std::string* out, const std::string& help);
  void Int(const std::string& name, int* out, const std::string& help);
  void Double(const std::string& name, double* out, const std::string& help);
  void Bool(const std::string& name, bool* out, const std::string& help);
  void IntList(const std::string& name, std::vector<int>* out, const std::string& help);   // 1,2,3
  void DoubleList(const std::string& name, std::vector<double>* out, const std::string& help);
  // A string that must be one of `choices`; anything else is refused while parsing:
  // "--format: must be text or json, got \"yaml\"".
  void Choice(const std::string& name, std::string* out, std::vector<std::string> choices, const std::string& help);
  // --format FORMAT, one of `formats` (the first is the default the verb sets in *out); every
  // verb with a --format declares it through this, so each refuses an unknown one the same way.
  void Format(std::string* out, std::vector<std::string> formats, const std::string& help);

  // Fills the declared outputs. Positional arguments go to `positional` (an error if null).
  // Errors name the flag: "--pp: expected an integer, got \"four\"". Sets help_requested() on
  // -h/--help.
  Status Parse(int argc, char** argv, std::vector<std::string>* positional = nullptr);
  bool help_requested() const { return help_requested_; }
  // True if the user gave this flag explicitly.
  bool Given(const std::string& name) const;
  std::string Help() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kIntList, kDoubleList, kChoice };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    bool given = false;
    std::vector<std::string> choices;  // kChoice
  };
  Status Set(Flag& flag, const std::string& value);

  std::string usage_, summary_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
};

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_FLAGS_H_
