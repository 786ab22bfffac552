// FlagSet: the options of one pipectl verb, parsed from argv, with a --help text made from the
// same declarations so the two never disagree.
#ifndef PIPECOORD_CLI_FLAGS_H_
#define PIPECOORD_CLI_FLAGS_H_

#include <string>
#include <vector>

#include "common/status.h"

namespace pipecoord::cli {

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

  // Fills the declared outputs. Positional arguments go to `positional` (an error if null).
  // Errors name the flag: "--pp: expected an integer, got \"four\"". Sets help_requested() on
  // -h/--help.
  Status Parse(int argc, char** argv, std::vector<std::string>* positional = nullptr);
  bool help_requested() const { return help_requested_; }
  // True if the user gave this flag explicitly.
  bool Given(const std::string& name) const;
  std::string Help() const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool, kIntList, kDoubleList };
  struct Flag {
    std::string name;
    Kind kind;
    void* out;
    std::string help;
    bool given = false;
  };
  Status Set(Flag& flag, const std::string& value);

  std::string usage_, summary_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
};

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_FLAGS_H_
