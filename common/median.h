// The median of a set of measurements, for the health checks and the calibration alike.
#ifndef PIPECOORD_COMMON_MEDIAN_H_
#define PIPECOORD_COMMON_MEDIAN_H_

#include <algorithm>
#include <cstddef>
#include <utility>
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

// The median of a set with one member left out, for every member in turn ("each rank against
// the median of the others"): one sort, then each in O(log n) instead of a copy and a selection
// each (quadratic in ranks: at 4,096 ranks the straggler check's peers' medians took most of the
// coordinator's ingest thread). Without(x) equals Median() of the set less one occurrence of x,
// to the bit (the same two middle values, added and halved in the same order).
class LeaveOneOutMedian {
 public:
  explicit LeaveOneOutMedian(std::vector<double> values) : sorted_(std::move(values)) {
    std::sort(sorted_.begin(), sorted_.end());
  }
  size_t size() const { return sorted_.size(); }
  // `own` must be one of the values (not NaN); 0 when nothing else is left, as Median of none.
  double Without(double own) const {
    const size_t n = sorted_.size();
    if (n <= 1) return 0;
    const size_t skip = static_cast<size_t>(std::lower_bound(sorted_.begin(), sorted_.end(), own) - sorted_.begin());
    auto at = [&](size_t k) { return sorted_[k < skip ? k : k + 1]; };  // the k-th of the others
    const size_t others = n - 1, mid = others / 2;
    if (others % 2 == 1) return at(mid);
    return (at(mid - 1) + at(mid)) / 2;
  }

 private:
  std::vector<double> sorted_;
};

}  // namespace pipecoord

#endif  // PIPECOORD_COMMON_MEDIAN_H_
