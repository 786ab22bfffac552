// How much memory a CPU worker may use, as it reports it to the coordinator (the "device
// memory" schedule "auto" plans against and the memory check compares peaks with).
#ifndef PIPECOORD_COMMON_HOST_MEMORY_H_
#define PIPECOORD_COMMON_HOST_MEMORY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord {

// The smallest of the cgroup's limit (v2 memory.max, or v1 memory.limit_in_bytes, when set: a
// Kubernetes pod's resources.limits.memory) and the machine's MemTotal. `root` prefixes the
// paths read ("" on a real machine; a folder with the same files in tests). 0 when none of
// them can be read.
uint64_t HostMemoryLimitBytes(const std::string& root = "");

// "8GiB", "512MiB", "64KiB", "1G" (= GiB) or a plain byte count; INVALID_ARGUMENT naming `field`.
Result<uint64_t> ParseByteSize(std::string_view text, const std::string& field);

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_HOST_MEMORY_H_
