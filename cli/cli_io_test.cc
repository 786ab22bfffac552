#include "cli/cli_io.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cli/verbs.h"

namespace pipecoord::cli {
namespace {

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(CliIoTest, ExitCodes) {
  EXPECT_EQ(Fail("t", InvalidArgument("--pp: must be >= 1, got 0")), kExitUsage);
  EXPECT_EQ(Fail("t", NotFound("x")), kExitUsage);
  EXPECT_EQ(Fail("t", Unimplemented("schedule \"zbv\" is not available yet")), kExitFailed);
  EXPECT_EQ(Fail("t", FailedPrecondition("stuck")), kExitFailed);
  EXPECT_EQ(Fail("t", Internal("bug")), kExitFailed);
}

TEST(CliIoTest, ReadInputFile) {
  const std::string path = TmpPath("in.csv");
  std::ofstream(path) << "0F0,0B0\n";
  auto text = ReadInputFile("--csv", path, 100);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "0F0,0B0\n");
  EXPECT_EQ(ReadInputFile("--csv", path, 4).status().message(), "--csv: " + path + ": must be at most 4 bytes, got 8");
  EXPECT_EQ(ReadInputFile("--csv", "/nonexistent/x.csv", 100).status().message(),
            "--csv: cannot open /nonexistent/x.csv: No such file or directory");
  EXPECT_EQ(ReadInputFile("JOB.json", "/nonexistent.json", 100).status().message(),
            "cannot open /nonexistent.json: No such file or directory");
  EXPECT_EQ(ReadInputFile("JOB.json", path, 4).status().message(), path + ": must be at most 4 bytes, got 8");
  EXPECT_EQ(ReadInputFile("--csv", "", 100).status().message(), "--csv: needs a file name");
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string tmp = dir ? dir : "/tmp";
  EXPECT_EQ(ReadInputFile("--csv", tmp, 100).status().message(), "--csv: cannot read " + tmp + ": Is a directory");
}

TEST(CliIoTest, EmitOutputWritesTheFile) {
  const std::string path = TmpPath("out.txt");
  EXPECT_EQ(EmitOutput("t", "hello\n", path, "text"), kExitOk);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "hello");
  EXPECT_EQ(EmitOutput("t", "x", "/nonexistent/dir/out.txt", "text"), kExitFailed);
}

}  // namespace
}  // namespace pipecoord::cli
