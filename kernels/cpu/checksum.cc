#include "kernels/cpu/checksum.h"

#include <cstring>
#include <cstddef>
#include <vector>

#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {

uint64_t HashFloats(const float* x, int64_t n) {
  uint64_t h = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    h += Mix64(static_cast<uint64_t>(bits) +
               static_cast<uint64_t>(i + 1) * 0x9E3779B97F4A7C15ULL);
  }
  return h;
}

double OrderedSum(const float* x, int64_t n) {
  std::vector<double> level;
  level.reserve(static_cast<size_t>((n + kChecksumBlock - 1) / kChecksumBlock));
  for (int64_t b = 0; b < n; b += kChecksumBlock) {
    const int64_t end = b + kChecksumBlock < n ? b + kChecksumBlock : n;
    double s = 0;
    for (int64_t i = b; i < end; ++i) s += static_cast<double>(x[i]);
    level.push_back(s);
  }
  if (level.empty()) return 0.0;
  while (level.size() > 1) {
    std::vector<double> next;
    next.reserve((level.size() + 1) / 2);
    for (size_t j = 0; j + 1 < level.size(); j += 2) next.push_back(level[j] + level[j + 1]);
    if (level.size() % 2 == 1) next.push_back(level.back());
    level.swap(next);
  }
  return level[0];
}

}  // namespace pipecoord::kernels::cpu
