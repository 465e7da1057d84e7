// GPTConfig: every size of a GPT-2-style model. Validated in one place.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

struct GPTConfig {
  int64_t num_layers = 6;
  int64_t hidden_size = 384;
  int64_t num_heads = 6;
  int64_t seq_length = 256;          // training context (tokens per sequence)
  int64_t max_position_embeddings = 0;  // rows of the position table (0: seq_length)
  int64_t vocab_size = 256;          // real vocabulary (tokens the data can contain)
  int64_t ffn_hidden_size = 0;       // 0: 4 * hidden_size
  int64_t make_vocab_size_divisible_by = 128;  // Megatron's padding, times tp
  float init_std = 0.02f;
  // Dropout probabilities (Megatron's --attention-dropout, --hidden-dropout).
  // The library default is 0 (the fp32 reference path); `tessera train`'s
  // flags default to Megatron's 0.1. Attention: the softmax probabilities;
  // hidden: the embedding output and each block's attention and MLP output
  // before its residual add. Masks: kernels/cpu/dropout.h.
  float attention_dropout = 0.0f;
  float hidden_dropout = 0.0f;

  int64_t head_size() const { return hidden_size / num_heads; }
  int64_t positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int64_t ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
  // The embedding table's row count: vocab rounded up to a multiple of
  // make_vocab_size_divisible_by * tp, so every tp rank gets an equal slice.
  int64_t padded_vocab(int64_t tp = 1) const {
    int64_t m = make_vocab_size_divisible_by * tp;
    return (vocab_size + m - 1) / m * m;
  }

  // Throws tessera::Error naming the flag of the first value out of range.
  void validate() const;
  std::string summary() const;
};

}  // namespace tessera
