// Who holds a resource this process was refused, read from /proc (Linux), for error messages
// such as "port 50051 is in use by pid 1234 (coordinator)". Each returns "" when it cannot tell
// (no /proc, another user's process, the holder just exited): callers then say less, never
// something false.
#ifndef PIPECOORD_COMMON_PROCESS_HOLDERS_H_
#define PIPECOORD_COMMON_PROCESS_HOLDERS_H_

#include <string>

namespace pipecoord {

// "pid 1234 (coordinator)", or "pid 1234" when its name cannot be read; "" for pid <= 0.
std::string DescribeProcess(int pid);

// The process with a TCP socket listening on `port` (IPv4 or IPv6, any address), described as
// above; "" when none is found.
std::string ListeningPortHolder(int port);

// The process holding a flock() lock on the file at `path`, described as above.
std::string FileLockHolder(const std::string& path);

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_PROCESS_HOLDERS_H_
