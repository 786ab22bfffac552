// Statistics of a token stream that put a model's loss in context.
#ifndef PIPECOORD_DATA_TOKEN_STATS_H_
#define PIPECOORD_DATA_TOKEN_STATS_H_

#include <cstdint>

#include "data/token_stream.h"

namespace pipecoord::data {

// The unigram (order-0) entropy of the stream in bits per token: H = -sum_t p(t) log2 p(t) with
// p(t) the share of tokens equal to t. The loss of the best model that ignores context: a
// language model that beats it has learnt something from the context (for byte-level data, in
// bits per byte). 0 for an empty stream. Every id must be in [0, vocab_size) (checked at open).
double UnigramEntropyBits(const TokenStream& tokens, int64_t vocab_size);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_TOKEN_STATS_H_
