// The median of a set of measurements, for the health checks and the calibration alike.
#ifndef PIPECOORD_COMMON_MEDIAN_H_
#define PIPECOORD_COMMON_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace pipecoord {

// Median of a copy (the mean of the two middle values for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  return (*std::max_element(v.begin(), v.begin() + mid) + hi) / 2;
}

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_MEDIAN_H_
