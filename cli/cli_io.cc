#include "cli/cli_io.h"

#include "cli/flags.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cli/verbs.h"

namespace pipecoord::cli {

Result<std::string> ReadInputFile(const std::string& flag, const std::string& path, size_t max_bytes) {
  const std::string where = "--" + flag + ": \"" + path + "\"";
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(where + ": cannot open (" + std::strerror(errno) + ")");
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return InvalidArgument(where + ": larger than " + std::to_string(max_bytes) + " bytes; refusing");
    }
  }
  if (in.bad()) return InvalidArgument(where + ": read failed");
  return text;
}

int EmitOutput(const std::string& verb, const std::string& text, const std::string& out_path,
               const std::string& what) {
  if (out_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 ? kExitOk : kExitFailed;
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (out) out.close();
  if (!out) {
    return Fail(verb, Status(Code::kUnavailable, "--out: cannot write \"" + out_path + "\" (" +
                                                     std::strerror(errno) + ")"));
  }
  std::printf("wrote %s to %s\n", what.c_str(), out_path.c_str());
  return kExitOk;
}

int Fail(const std::string& verb, const Status& status) {
  std::fprintf(stderr, "pipectl %s: %s\n", verb.c_str(), status.message().c_str());
  const bool usage = status.code() == Code::kInvalidArgument || status.code() == Code::kNotFound;
  return usage ? kExitUsage : kExitFailed;
}

int ParseFlagsOrExit(FlagSet& flags, int argc, char** argv, const std::string& verb,
                     std::vector<std::string>* positional) {
  Status st = flags.Parse(argc, argv, positional);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return kExitOk;
  }
  if (!st.ok()) return Fail(verb, st);
  return -1;
}

}  // namespace pipecoord::cli
