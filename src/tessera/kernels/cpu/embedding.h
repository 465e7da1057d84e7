// Token and position embeddings. The token table may be a vocab-parallel
// slice holding rows [vocab_begin, vocab_end): tokens outside contribute zero
// (the tensor-parallel all-reduce sums the slices).
#pragma once
#include <cstdint>

namespace tessera::cpu {

// out (N, C) = wte[tokens[n] - vocab_begin] for tokens in range, 0 otherwise (written).
void token_embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                             int64_t C, int64_t vocab_begin, int64_t vocab_end);

// dwte (vocab_end - vocab_begin, C) += dout rows of in-range tokens.
void token_embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                              int64_t C, int64_t vocab_begin, int64_t vocab_end);

// out (B, T, C) += wpe (T, C) broadcast over B; positions start at pos0.
void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T, int64_t C,
                                int64_t pos0);

// dwpe (T, C) += sum over B of dout (B, T, C).
void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T, int64_t C);

}  // namespace tessera::cpu
