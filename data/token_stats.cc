#include "data/token_stats.h"

#include <cmath>
#include <vector>

namespace pipecoord::data {

double UnigramEntropyBits(const TokenStream& tokens, int64_t vocab_size) {
  const uint64_t n = tokens.size();
  if (n == 0 || vocab_size <= 0) return 0;
  std::vector<uint64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (uint64_t i = 0; i < n; ++i) ++counts[static_cast<size_t>(tokens.At(i))];
  double h = 0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(n);
    h -= p * std::log2(p);
  }
  return h;
}

}  // namespace pipecoord::data
