// Rotary position embedding (RoPE, Su et al.), Llama's interleaved form: within each head, the
// pair (x[2i], x[2i+1]) is rotated by the angle pos * base^(-2i / head_dim), where pos is the
// token's position inside its sequence.
//
// Layout: x [batch, seq, heads, head_dim] row-major (the [tokens, hidden] layout of q and k),
// head_dim even. Both directions work in place. RoPE has no weights, so it has no W part.
#ifndef PIPECOORD_KERNELS_CPU_ROTARY_H_
#define PIPECOORD_KERNELS_CPU_ROTARY_H_

#include <cstdint>
#include <vector>

namespace pipecoord::kernels::cpu {

// Llama 3's rotary scaling (transformers' rope_type "llama3", _compute_llama3_parameters): the
// frequencies of wavelengths above original_max_positions / low_freq_factor are divided by
// `factor`, those below original_max_positions / high_freq_factor kept, and those between
// interpolated smoothly. factor 0: no scaling (the base frequencies as they are).
struct RopeScaling {
  double factor = 0;
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_max_positions = 8192;

  bool enabled() const { return factor > 0; }
  // Pair i's frequency base^(-2i / head_dim), scaled.
  double Frequency(double base_frequency) const;
};

// cos and sin of every (position, pair) angle, [seq, head_dim / 2] row-major, in double.
struct RopeTable {
  int64_t seq = 0;
  int64_t head_dim = 0;
  std::vector<double> cos, sin;
};

// Builds the table for positions [0, seq); head_dim must be even.
RopeTable MakeRopeTable(int64_t seq, int64_t head_dim, double base = 10000.0, const RopeScaling& scaling = {});

// F, in place: rotates every pair of x by its angle.
template <typename T>
void RopeForward(T* x, const RopeTable& table, int64_t batch, int64_t heads);

// B, in place: dx = R^T dy, i.e. rotates every pair of the gradient by minus its angle.
template <typename T>
void RopeBackward(T* grad, const RopeTable& table, int64_t batch, int64_t heads);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_ROTARY_H_
