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

// cos and sin of every (position, pair) angle, [seq, head_dim / 2] row-major, in double.
struct RopeTable {
  int64_t seq = 0;
  int64_t head_dim = 0;
  std::vector<double> cos, sin;
};

// Builds the table for positions [0, seq); head_dim must be even.
RopeTable MakeRopeTable(int64_t seq, int64_t head_dim, double base = 10000.0);

// F, in place: rotates every pair of x by its angle.
template <typename T>
void RopeForward(T* x, const RopeTable& table, int64_t batch, int64_t heads);

// B, in place: dx = R^T dy, i.e. rotates every pair of the gradient by minus its angle.
template <typename T>
void RopeBackward(T* grad, const RopeTable& table, int64_t batch, int64_t heads);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_ROTARY_H_
