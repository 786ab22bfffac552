// The error metric of the GEMM and attention tests: how far a GPU tensor is from its CPU twin's,
// relative to the tensor's largest value (not per element):
//
//   error = max over i of |gpu_i - cpu_i| / max over j of |cpu_j|
//
// Normwise, because every output element is a long sum whose rounding error scales with the
// terms summed, not with the (possibly cancelled, near-zero) result. A NaN or infinity in gpu
// (a NaN-poisoned element the kernel never wrote) or a size mismatch gives +infinity, which
// fails every threshold.
#ifndef PIPECOORD_KERNELS_CUDA_NORMWISE_ERROR_H_
#define PIPECOORD_KERNELS_CUDA_NORMWISE_ERROR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace pipecoord::kernels::cuda {

struct NormwiseError {
  double error = 0;      // the metric above
  int64_t worst = -1;    // the element with the largest |gpu - cpu| (-1: none)
  double gpu_value = 0;  // gpu[worst]
  double cpu_value = 0;  // cpu[worst]
  double cpu_max = 0;    // max |cpu|
  size_t gpu_size = 0, cpu_size = 0;

  // "max|gpu - cpu| / max|cpu| = 3.1e-07 (max|cpu| 2.5); worst element 17 of 1000: gpu .., cpu .."
  std::string Describe() const {
    std::ostringstream out;
    out.precision(9);
    out << "max|gpu - cpu| / max|cpu| = " << error << " (max|cpu| " << cpu_max << ")";
    if (gpu_size != cpu_size) {
      out << "; size mismatch: gpu " << gpu_size << ", cpu " << cpu_size;
    } else if (worst >= 0) {
      out << "; worst element " << worst << " of " << cpu_size << ": gpu " << gpu_value << ", cpu "
          << cpu_value;
    }
    return out.str();
  }
};

template <typename G, typename GA, typename C, typename CA>
NormwiseError CompareNormwise(const std::vector<G, GA>& gpu, const std::vector<C, CA>& cpu) {
  NormwiseError e;
  e.gpu_size = gpu.size();
  e.cpu_size = cpu.size();
  if (gpu.size() != cpu.size()) {
    e.error = std::numeric_limits<double>::infinity();
    return e;
  }
  double worst_diff = -1;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double g = static_cast<double>(gpu[i]);
    const double c = static_cast<double>(cpu[i]);
    e.cpu_max = std::max(e.cpu_max, std::fabs(c));
    const double diff =
        std::isfinite(g) ? std::fabs(g - c) : std::numeric_limits<double>::infinity();
    if (diff > worst_diff) {
      worst_diff = diff;
      e.worst = static_cast<int64_t>(i);
      e.gpu_value = g;
      e.cpu_value = c;
    }
  }
  if (worst_diff < 0) return e;  // empty tensors agree
  e.error = e.cpu_max > 0 ? worst_diff / e.cpu_max : worst_diff;
  return e;
}

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_NORMWISE_ERROR_H_
