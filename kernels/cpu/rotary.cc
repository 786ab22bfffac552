#include "kernels/cpu/rotary.h"

#include <cmath>
#include <cstddef>

namespace pipecoord::kernels::cpu {
namespace {

// sign +1 rotates by the angle, -1 by minus the angle.
template <typename T>
void Rotate(T* x, const RopeTable& table, int64_t batch, int64_t heads, double sign) {
  const int64_t half = table.head_dim / 2;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < table.seq; ++p) {
      const double* c = table.cos.data() + p * half;
      const double* s = table.sin.data() + p * half;
      T* row = x + (b * table.seq + p) * heads * table.head_dim;
      for (int64_t hd = 0; hd < heads; ++hd) {
        T* v = row + hd * table.head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const double x0 = v[2 * i], x1 = v[2 * i + 1];
          const double sn = sign * s[i];
          v[2 * i] = static_cast<T>(x0 * c[i] - x1 * sn);
          v[2 * i + 1] = static_cast<T>(x0 * sn + x1 * c[i]);
        }
      }
    }
  }
}

}  // namespace

double RopeScaling::Frequency(double f) const {
  if (!enabled()) return f;
  constexpr double kPi = 3.14159265358979323846;
  const double wavelength = 2 * kPi / f;
  const double low_freq_wavelength = original_max_positions / low_freq_factor;
  const double high_freq_wavelength = original_max_positions / high_freq_factor;
  if (wavelength < high_freq_wavelength) return f;         // high frequencies: kept
  if (wavelength > low_freq_wavelength) return f / factor;  // low frequencies: scaled
  const double smooth = (original_max_positions / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
  return (1 - smooth) * f / factor + smooth * f;
}

RopeTable MakeRopeTable(int64_t seq, int64_t head_dim, double base, const RopeScaling& scaling) {
  RopeTable t;
  t.seq = seq;
  t.head_dim = head_dim;
  const int64_t half = head_dim / 2;
  t.cos.resize(static_cast<size_t>(seq * half));
  t.sin.resize(static_cast<size_t>(seq * half));
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) * scaling.Frequency(std::pow(base, -2.0 * static_cast<double>(i) / head_dim));
      t.cos[p * half + i] = std::cos(angle);
      t.sin[p * half + i] = std::sin(angle);
    }
  }
  return t;
}

template <typename T>
void RopeForward(T* x, const RopeTable& table, int64_t batch, int64_t heads) {
  Rotate(x, table, batch, heads, 1.0);
}

template <typename T>
void RopeBackward(T* grad, const RopeTable& table, int64_t batch, int64_t heads) {
  Rotate(grad, table, batch, heads, -1.0);
}

template void RopeForward<float>(float*, const RopeTable&, int64_t, int64_t);
template void RopeForward<double>(double*, const RopeTable&, int64_t, int64_t);
template void RopeBackward<float>(float*, const RopeTable&, int64_t, int64_t);
template void RopeBackward<double>(double*, const RopeTable&, int64_t, int64_t);

}  // namespace pipecoord::kernels::cpu
