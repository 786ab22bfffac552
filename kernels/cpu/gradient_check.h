// Finite-difference gradient checks for tests: central differences of a scalar objective and a
// relative error that says how far an analytic gradient is from them.
#ifndef PIPECOORD_KERNELS_CPU_GRADIENT_CHECK_H_
#define PIPECOORD_KERNELS_CPU_GRADIENT_CHECK_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu::testing {

// (f(x + h e_i) - f(x - h e_i)) / 2h for every i, perturbing *x in place and restoring it.
template <typename V>
std::vector<double> NumericGradient(const std::function<double()>& f, V* x, double h) {
  std::vector<double> g(x->size());
  for (size_t i = 0; i < x->size(); ++i) {
    const double keep = (*x)[i];
    (*x)[i] = keep + h;
    const double up = f();
    (*x)[i] = keep - h;
    const double down = f();
    (*x)[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// max_i |analytic_i - numeric_i| / max(max_i |numeric_i|, 1e-30): normwise, so tiny entries
// of a gradient do not blow the figure up. Returns 1 when the sizes differ.
template <typename A, typename B>
double RelativeError(const A& analytic, const B& numeric) {
  if (analytic.size() != numeric.size()) return 1.0;
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < analytic.size(); ++i) {
    diff = std::max(diff, std::fabs(analytic[i] - numeric[i]));
    scale = std::max(scale, std::fabs(numeric[i]));
  }
  return diff / scale;
}

// n values uniform in [-1, 1) from the seed.
inline std::vector<double> RandomVector(int64_t n, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  Rng rng(seed);
  rng.FillUniform(v.data(), n, -1.0, 1.0);
  return v;
}

// sum_i a_i b_i in double: the objective <output, r> whose gradient w.r.t. the output is r.
template <typename A, typename B>
double Inner(const A& a, const B& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// Prints "fd <what>: rel error 3.1e-10" so test logs keep the measured figure.
inline void ReportError(const char* what, double err) {
  std::printf("fd %-40s rel error %.2e\n", what, err);
}

}  // namespace pipecoord::kernels::cpu::testing

#endif  // PIPECOORD_KERNELS_CPU_GRADIENT_CHECK_H_
