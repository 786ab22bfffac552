// Numbers as people read them, always with their unit.
#ifndef PIPECOORD_MEMORY_UNITS_H_
#define PIPECOORD_MEMORY_UNITS_H_

#include <cstdint>
#include <string>

namespace pipecoord::memory {

inline constexpr int64_t kKiB = int64_t{1} << 10;
inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;

// "512 B", "64.0 MiB", "12.55 GiB" (binary units, 1 GiB = 2^30 bytes).
std::string FormatBytes(int64_t bytes);
// "6.74 B", "218.1 M", "4096" (decimal: millions, billions of parameters).
std::string FormatCount(int64_t n);
// "1.25 s", "830 ms", "12.0 us".
std::string FormatSeconds(double seconds);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_UNITS_H_
