#include "tessera/config/gpt_config.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

void GPTConfig::validate() const {
  TESSERA_CHECK(num_layers >= 1, "--num-layers must be >= 1 (got {})", num_layers);
  TESSERA_CHECK(hidden_size >= 1, "--hidden-size must be >= 1 (got {})", hidden_size);
  TESSERA_CHECK(num_heads >= 1, "--num-attention-heads must be >= 1 (got {})", num_heads);
  TESSERA_CHECK(hidden_size % num_heads == 0,
                "--hidden-size ({}) must be divisible by --num-attention-heads ({})", hidden_size,
                num_heads);
  TESSERA_CHECK(seq_length >= 1, "--seq-length must be >= 1 (got {})", seq_length);
  TESSERA_CHECK(max_position_embeddings == 0 || max_position_embeddings >= seq_length,
                "--max-position-embeddings ({}) must be >= --seq-length ({})",
                max_position_embeddings, seq_length);
  TESSERA_CHECK(vocab_size >= 2, "vocabulary size must be >= 2 (got {})", vocab_size);
  TESSERA_CHECK(vocab_size < (int64_t(1) << 31), "vocabulary size {} does not fit int32 token ids",
                vocab_size);
  TESSERA_CHECK(ffn_hidden_size >= 0, "--ffn-hidden-size must be >= 0 (got {})", ffn_hidden_size);
  TESSERA_CHECK(make_vocab_size_divisible_by >= 1,
                "--make-vocab-size-divisible-by must be >= 1 (got {})",
                make_vocab_size_divisible_by);
  TESSERA_CHECK(init_std > 0, "--init-method-std must be > 0 (got {})", init_std);
  // The negated form also refuses NaN.
  TESSERA_CHECK(attention_dropout >= 0.0f && attention_dropout < 1.0f,
                "--attention-dropout must be in [0, 1) (got {})", attention_dropout);
  TESSERA_CHECK(hidden_dropout >= 0.0f && hidden_dropout < 1.0f,
                "--hidden-dropout must be in [0, 1) (got {})", hidden_dropout);
}

std::string GPTConfig::summary() const {
  std::string s = fmt::format("layers {} hidden {} heads {} ffn {} seq {} vocab {} (padded {})",
                              num_layers, hidden_size, num_heads, ffn(), seq_length, vocab_size,
                              padded_vocab());
  if (attention_dropout > 0 || hidden_dropout > 0)
    s += fmt::format(" dropout attention {} hidden {}", attention_dropout, hidden_dropout);
  return s;
}

}  // namespace tessera
