// The model shapes tests share: the small GPT most tests train (big enough to
// have every part of the model: several heads, a padded token table; small
// enough to run 20 steps on several ranks in seconds), and GPT-2 small for
// the tests that check counts and byte formulas against published numbers.
#pragma once
#include <cstdint>

#include "tessera/config/gpt_config.h"

namespace tessera::test {

inline GPTConfig tiny_gpt(int64_t layers = 2) {
  GPTConfig m;
  m.num_layers = layers;
  m.hidden_size = 32;
  m.num_heads = 4;
  m.seq_length = 16;
  m.vocab_size = 67;  // padded to 128: padding rows must survive as zeros, never be predicted
  return m;
}

// A 16-wide model (2 heads, 8 tokens, vocabulary 32, large init so the
// loss moves): every activation view is a multiple of 16 floats, so the
// arena's 64-byte alignment adds nothing and memory formulas are exact.
inline GPTConfig gpt16(int64_t layers) {
  GPTConfig m;
  m.num_layers = layers;
  m.hidden_size = 16;
  m.num_heads = 2;
  m.seq_length = 8;
  m.vocab_size = 32;
  m.init_std = 0.2f;
  return m;
}

// tiny_gpt's Llama-family sibling (issue 17): RMSNorm, SwiGLU (F = 64,
// the 8/3 default), rotary positions, grouped-query attention (4 query heads
// over 2 key/value heads), an untied LM head, no linear biases.
inline GPTConfig tiny_llama(int64_t layers = 2) {
  GPTConfig m = tiny_gpt(layers);
  m.normalization = Normalization::RMSNorm;
  m.swiglu = true;
  m.position_embedding = PositionEmbedding::Rope;
  m.num_query_groups = 2;
  m.untie_embeddings = true;
  m.add_bias_linear = false;
  return m;
}

// GPT-2 124M as published (tied head, 1024 positions).
inline GPTConfig gpt2_small() {
  GPTConfig m;
  m.num_layers = 12;
  m.hidden_size = 768;
  m.num_heads = 12;
  m.seq_length = 1024;
  m.vocab_size = 50257;
  return m;
}

}  // namespace tessera::test
