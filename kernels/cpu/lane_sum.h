// A sum in double that vectorises and stays deterministic: term(0) + ... + term(n - 1) over 8
// interleaved partial sums (term j goes to sum j mod 8), added in a fixed tree at the end. A plain
// running sum cannot be vectorised (the compiler may not reorder floating-point additions); this
// order is fixed by the code, so the result is the same for the same inputs on every run and at
// any buffer alignment. Callers pass a lambda that reads element j.
#ifndef PIPECOORD_KERNELS_CPU_LANE_SUM_H_
#define PIPECOORD_KERNELS_CPU_LANE_SUM_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

template <typename Term>
inline double LaneSum(int64_t n, const Term& term) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += term(j + l);
  }
  for (int l = 0; j < n; ++j, ++l) acc[l] += term(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_LANE_SUM_H_
