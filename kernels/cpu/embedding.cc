#include "kernels/cpu/embedding.h"

#include <algorithm>

namespace pipecoord::kernels::cpu {

template <typename T>
void EmbeddingForward(const T* table, const int32_t* ids, T* out, int64_t n, int64_t dim) {
  for (int64_t r = 0; r < n; ++r) {
    const T* src = table + static_cast<int64_t>(ids[r]) * dim;
    std::copy(src, src + dim, out + r * dim);
  }
}

template <typename T>
void EmbeddingBackwardWeight(const T* dout, const int32_t* ids, T* dtable, int64_t n,
                             int64_t dim) {
  for (int64_t r = 0; r < n; ++r) {
    T* dst = dtable + static_cast<int64_t>(ids[r]) * dim;
    const T* src = dout + r * dim;
    for (int64_t c = 0; c < dim; ++c) dst[c] += src[c];
  }
}

template void EmbeddingForward<float>(const float*, const int32_t*, float*, int64_t, int64_t);
template void EmbeddingForward<double>(const double*, const int32_t*, double*, int64_t, int64_t);
template void EmbeddingBackwardWeight<float>(const float*, const int32_t*, float*, int64_t,
                                             int64_t);
template void EmbeddingBackwardWeight<double>(const double*, const int32_t*, double*, int64_t,
                                              int64_t);

}  // namespace pipecoord::kernels::cpu
