// The error metric of the kernels/cuda tests: how far a GPU result is from its CPU twin's.
//
//   error = max over i of |gpu_i - cpu_i| / max(|cpu_i|, 1e-6 + 1e-3 * max_j |cpu_j|)
//
// Relative per element where the element is not tiny against the tensor; where it is (a value
// that cancelled to near zero), the error is measured against a thousandth of the tensor's
// largest magnitude instead, so rounding noise on a near-zero element does not read as a large
// relative error. A NaN or infinity in gpu where cpu is finite (an unwritten, NaN-poisoned
// element), or a size mismatch, gives +infinity, which fails every threshold.
#ifndef PIPECOORD_KERNELS_CUDA_COMPARE_H_
#define PIPECOORD_KERNELS_CUDA_COMPARE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <span>
#include <string>
#include <vector>

namespace pipecoord::kernels::cuda {

// Thresholds on the metric: float outputs, and bf16 outputs (2^-8 relative rounding, twice over).
inline constexpr double kFloatTolerance = 1e-4;
inline constexpr double kBf16Tolerance = 2e-2;

struct Comparison {
  double error = 0;        // the metric above
  int64_t worst = -1;      // the element that gave it (-1: none, or a size mismatch)
  double gpu_value = 0;    // gpu[worst]
  double cpu_value = 0;    // cpu[worst]
  int64_t gpu_size = 0, cpu_size = 0;

  // "max |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|) = 2.1e-05 at element 17 of 1000
  //  (gpu 0.123456789, cpu 0.123459)"
  std::string Describe() const {
    std::ostringstream out;
    out.precision(9);
    out << "max |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|) = " << error;
    if (gpu_size != cpu_size) {
      out << " (size mismatch: gpu " << gpu_size << ", cpu " << cpu_size << ")";
    } else if (worst >= 0) {
      out << " at element " << worst << " of " << cpu_size << " (gpu " << gpu_value << ", cpu "
          << cpu_value << ")";
    }
    return out.str();
  }
};

template <typename G, typename C>
Comparison CompareToCpu(std::span<const G> gpu, std::span<const C> cpu) {
  Comparison c;
  c.gpu_size = static_cast<int64_t>(gpu.size());
  c.cpu_size = static_cast<int64_t>(cpu.size());
  if (gpu.size() != cpu.size()) {
    c.error = std::numeric_limits<double>::infinity();
    return c;
  }
  double largest = 0;
  for (const C v : cpu) largest = std::max(largest, std::fabs(static_cast<double>(v)));
  const double floor = 1e-6 + 1e-3 * largest;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double g = static_cast<double>(gpu[i]);
    const double r = static_cast<double>(cpu[i]);
    double e;
    if (!std::isfinite(r)) {
      e = (g == r || (std::isnan(g) && std::isnan(r))) ? 0.0
                                                       : std::numeric_limits<double>::infinity();
    } else if (!std::isfinite(g)) {
      e = std::numeric_limits<double>::infinity();
    } else {
      e = std::fabs(g - r) / std::max(std::fabs(r), floor);
    }
    if (c.worst < 0 || e > c.error) {
      c.error = e;
      c.worst = static_cast<int64_t>(i);
      c.gpu_value = g;
      c.cpu_value = r;
    }
  }
  return c;
}

template <typename G, typename C>
Comparison CompareToCpu(const std::vector<G>& gpu, const std::vector<C>& cpu) {
  return CompareToCpu(std::span<const G>(gpu), std::span<const C>(cpu));
}

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_COMPARE_H_
