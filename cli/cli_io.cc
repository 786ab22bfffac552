#include "cli/cli_io.h"

#include "common/flags.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "cli/verbs.h"

namespace pipecoord::cli {

Result<std::string> ReadInputFile(const std::string& arg, const std::string& path, size_t max_bytes) {
  if (path.empty()) return InvalidArgument(arg + ": needs a file name");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  // A file named by a flag says which; a positional one (JOB.json) is named by its path alone.
  const std::string flag = arg.rfind("--", 0) == 0 ? arg + ": " : "";
  if (fd < 0) return InvalidArgument(flag + "cannot open " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  auto too_big = [&](const std::string& got) {
    return InvalidArgument(flag + path + ": must be at most " + std::to_string(max_bytes) + " bytes, got " + got);
  };
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    return too_big(std::to_string(st.st_size));
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return InvalidArgument(flag + "cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) return too_big("more");  // a pipe or a file still growing
  }
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
