#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/linear_reference.h"
#include "kernels/cpu/swiglu_reference.h"
#include "kernels/cpu/vector_exp.h"

namespace pipecoord::kernels::cpu {
namespace {

// The fp32 gate in float arithmetic over whole arrays, so that the loops vectorise; the clones
// give 16-, 8- and 4-wide code, one picked once per process by the CPU it runs on (the same
// machine always runs the same clone, so results stay bit-identical between runs).
// sigmoid(u) = 1 / (1 + e), e = exp(-u); 1 - sigmoid(u) = e sigmoid(u) (no cancellation).
__attribute__((target_clones("avx512f", "avx2", "default"))) void SwiGluForwardFloat(
    const float* __restrict gate, const float* __restrict up, float* __restrict z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = gate[i];
    z[i] = u / (1.0f + VectorExp(-u)) * up[i];
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void SwiGluBackwardFloat(
    const float* __restrict dz, const float* __restrict gate, const float* __restrict up,
    float* __restrict dgate, float* __restrict dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float u = gate[i];
    const float e = VectorExp(-u);
    const float sg = 1.0f / (1.0f + e);
    const float g = dz[i];
    dgate[i] = g * up[i] * sg * (1.0f + u * (e * sg));
    dup[i] = g * u * sg;
  }
}

}  // namespace

template <>
void SwiGluForward<float>(const float* gate, const float* up, float* z, int64_t n) {
  if (ReferenceKernelsRequested()) return SwiGluForwardReference(gate, up, z, n);
  SwiGluForwardFloat(gate, up, z, n);
}

template <>
void SwiGluBackward<float>(const float* dz, const float* gate, const float* up, float* dgate,
                           float* dup, int64_t n) {
  if (ReferenceKernelsRequested()) return SwiGluBackwardReference(dz, gate, up, dgate, dup, n);
  SwiGluBackwardFloat(dz, gate, up, dgate, dup, n);
}

template <>
void SwiGluForward<double>(const double* gate, const double* up, double* z, int64_t n) {
  SwiGluForwardReference(gate, up, z, n);
}

template <>
void SwiGluBackward<double>(const double* dz, const double* gate, const double* up, double* dgate,
                            double* dup, int64_t n) {
  SwiGluBackwardReference(dz, gate, up, dgate, dup, n);
}

}  // namespace pipecoord::kernels::cpu
