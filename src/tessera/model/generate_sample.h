// Choosing the next token from logits: greedy, temperature, top-k, top-p.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/core/rng.h"

namespace tessera {

struct SamplingConfig {
  float temperature = 1.0f;  // <= 0: greedy
  int64_t top_k = 0;         // keep the k most likely tokens (0: all; 1: greedy)
  float top_p = 1.0f;        // keep the smallest set whose probability reaches p (1: all)
};

// Index of the largest logit (the lowest index among ties).
int32_t argmax_token(const float* logits, int64_t V);

// Draws one token from logits (V) under cfg with one uniform from rng.
// Deterministic: the same logits, config and rng state give the same token.
int32_t sample_token(const float* logits, int64_t V, const SamplingConfig& cfg, Rng& rng);

}  // namespace tessera
