#include "common/process_holders.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

namespace pipecoord {
namespace {

// Inodes of the sockets listening on `port` (state 0A in /proc/net/tcp and tcp6).
std::set<std::string> ListeningSocketInodes(int port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode)) continue;
      const size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) inodes.insert(inode);
    }
  }
  return inodes;
}

// The first process with a descriptor open on "socket:[INODE]" for one of `inodes`.
int SocketOwner(const std::set<std::string>& inodes) {
  if (inodes.empty()) return 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  int found = 0;
  while (dirent* e = readdir(proc)) {
    const std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fd_dir = "/proc/" + pid + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    while (dirent* f = readdir(fds)) {
      char target[128];
      const std::string link = fd_dir + "/" + f->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string t(target, n);
      if (t.rfind("socket:[", 0) == 0 && inodes.count(t.substr(8, t.size() - 9)) > 0) {
        found = std::stoi(pid);
        break;
      }
    }
    closedir(fds);
    if (found != 0) break;
  }
  closedir(proc);
  return found;
}

}  // namespace

std::string DescribeProcess(int pid) {
  if (pid <= 0) return "";
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return "pid " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

std::string ListeningPortHolder(int port) { return DescribeProcess(SocketOwner(ListeningSocketInodes(port))); }

std::string FileLockHolder(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  // Lines like "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (pid, then major:minor:inode).
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string slot, kind, advisory, mode, pid, where;
    if (!(fields >> slot >> kind) || kind == "->") continue;  // "->" marks a waiter
    if (!(fields >> advisory >> mode >> pid >> where) || kind != "FLOCK") continue;
    const size_t colon = where.rfind(':');
    if (colon == std::string::npos || where.substr(colon + 1) != std::to_string(st.st_ino)) continue;
    return DescribeProcess(std::atoi(pid.c_str()));
  }
  return "";
}

}  // namespace pipecoord
