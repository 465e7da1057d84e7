// Where a dropout mask is drawn (kernels/cpu/dropout.h says how): plain data
// the model fills per layer and micro-batch and every backend reads, so the
// same element gets the same keep bit in every layout and on every backend.
#pragma once
#include <cstdint>

namespace tessera {

enum class DropoutSiteKind : uint32_t {
  Embedding = 1,      // the embedding output (Megatron: hidden dropout)
  AttentionProbs = 2, // softmax probabilities inside attention
  AttentionOut = 3,   // the attention block's output, before the residual add
  MlpOut = 4,         // the MLP block's output, before the residual add
};

struct DropoutSite {
  float p = 0.0f;              // probability of dropping; 0 = dropout off
  uint64_t seed = 0;           // --seed
  int64_t step = 0;            // optimizer step (1-based)
  int64_t layer = 0;           // global layer index (the embedding: 0)
  DropoutSiteKind site = DropoutSiteKind::Embedding;
  int64_t first_sample = 0;    // global sample index of the micro-batch's sequence 0
  int64_t head0 = 0;           // AttentionProbs: global index of this rank's head 0 (tp rank * local heads)

  bool active() const { return p > 0.0f; }
  // Kept values are multiplied by this (inverted dropout), in every layout.
  float keep_scale() const { return 1.0f / (1.0f - p); }
};

}  // namespace tessera
