// A real etcd (Debian's etcd-server, /usr/bin/etcd) for tests: one member on free loopback ports,
// its data in a fresh directory under TEST_TMPDIR, killed and removed with the object. Ready()
// waits until it answers.
#ifndef PIPECOORD_COORDINATOR_HA_ETCD_FOR_TESTS_H_
#define PIPECOORD_COORDINATOR_HA_ETCD_FOR_TESTS_H_

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "coordinator/ha/etcd_client.h"

namespace pipecoord::coordinator::ha {

inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class EtcdForTests {
 public:
  explicit EtcdForTests(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/etcd-" + name + "-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    client_port_ = FreeLoopbackPort();
    const int peer = FreeLoopbackPort();
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = dir_ + ".log";
      freopen(log.c_str(), "w", stderr);
      freopen(log.c_str(), "a", stdout);
      execl("/usr/bin/etcd", "etcd", "--name", "m0", "--data-dir", dir_.c_str(), "--listen-client-urls", client.c_str(),
            "--advertise-client-urls", client.c_str(), "--listen-peer-urls", peer_url.c_str(),
            "--initial-advertise-peer-urls", peer_url.c_str(), "--initial-cluster", ("m0=" + peer_url).c_str(),
            "--max-request-bytes", "67108864", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~EtcdForTests() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  // True once a read answers (within 20 s).
  bool Ready() const {
    auto client = EtcdClient::Connect(endpoint(), std::chrono::milliseconds(500));
    if (!client.ok()) return false;
    for (int i = 0; i < 200; ++i) {
      if ((*client)->GetPrefix("/ready-probe/").ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  std::string dir_;
  int client_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace pipecoord::coordinator::ha

#endif  // PIPECOORD_COORDINATOR_HA_ETCD_FOR_TESTS_H_
