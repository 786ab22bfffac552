#include "common/process_holders.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace pipecoord {
namespace {

std::string Me() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return "pid " + std::to_string(getpid()) + " (" + name + ")";
}

TEST(ProcessHoldersTest, NamesTheProcessListeningOnAPort) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  EXPECT_EQ(ListeningPortHolder(port), "");  // bound, not listening yet
  ASSERT_EQ(listen(fd, 1), 0);
  EXPECT_EQ(ListeningPortHolder(port), Me());
  close(fd);
  EXPECT_EQ(ListeningPortHolder(port), "");
}

TEST(ProcessHoldersTest, NamesTheProcessHoldingAFileLock) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/locked";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(FileLockHolder(path), "");
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(FileLockHolder(path), Me());
  close(fd);
  EXPECT_EQ(FileLockHolder(path), "");
  EXPECT_EQ(FileLockHolder(path + ".missing"), "");
}

TEST(ProcessHoldersTest, DescribesOnlyRealPids) {
  EXPECT_EQ(DescribeProcess(0), "");
  EXPECT_EQ(DescribeProcess(getpid()), Me());
}

}  // namespace
}  // namespace pipecoord
