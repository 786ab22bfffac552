// What every pipectl verb does at its edges: read an input file, write the output, and turn a
// Status into a message on stderr and an exit code (verbs.h).
#ifndef PIPECOORD_CLI_CLI_IO_H_
#define PIPECOORD_CLI_CLI_IO_H_

#include <cstddef>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"

namespace pipecoord::cli {

// The whole file at `path`, which the user gave as `arg` ("--csv", "JOB.json"). Errors are
// INVALID_ARGUMENT: "ARG: needs a file name" (empty path), "cannot open PATH: REASON" and
// "cannot read PATH: REASON" (strerror: missing, unreadable, a directory), "PATH: must be at
// most MAX bytes, got N"; each after "ARG: " when ARG is a flag ("--csv: cannot open ...").
Result<std::string> ReadInputFile(const std::string& arg, const std::string& path, size_t max_bytes);

// With an empty `out_path`, writes `text` to stdout; otherwise writes it to `out_path` and
// prints "wrote <what> to <out_path>" on stdout. Returns kExitOk, or kExitFailed (and a message
// on stderr naming --out) when the file cannot be written.
int EmitOutput(const std::string& verb, const std::string& text, const std::string& out_path,
               const std::string& what);

// Parses argv into `flags` (positional arguments into `positional`, which may be null). Returns
// kExitOk after printing the help when it was asked for, the exit code of Fail() when parsing
// failed, or -1 when the verb should go on.
int ParseFlagsOrExit(FlagSet& flags, int argc, char** argv, const std::string& verb,
                     std::vector<std::string>* positional = nullptr);

// Prints "pipectl <verb>: <message>" on stderr; returns kExitUsage for INVALID_ARGUMENT and
// NOT_FOUND (the user's input), kExitFailed for everything else.
int Fail(const std::string& verb, const Status& status);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_CLI_IO_H_
