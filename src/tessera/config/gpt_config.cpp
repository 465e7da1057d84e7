#include "tessera/config/gpt_config.h"

#include <fmt/format.h>

#include <cmath>

#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

// The model's tensors list every layer (ParamLayout), so a billion layers
// would exhaust memory describing them before any check of the bytes; the
// largest published models have a few hundred.
constexpr int64_t kMaxLayers = int64_t(1) << 16;

// An upper bound of the model's parameter bytes (fp32 weights, gradients and
// Adam's two moments: 16 per parameter) computed without wrapping, so that
// no size derived from this config (ParamLayout's offsets, the planner's
// byte counts) can overflow int64. The exact count is ParamLayout's; this
// only has to be larger.
void check_sizes_fit(const GPTConfig& m) {
  const char* what = "model size (--hidden-size, --ffn-hidden-size, --num-layers, vocabulary)";
  const int64_t C = m.hidden_size;
  const int64_t F = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : checked_mul(4, C, what);
  const int64_t rows = checked_add(m.vocab_size, m.make_vocab_size_divisible_by, what);
  const int64_t table = checked_mul(checked_add(rows, m.positions(), what), C, what);
  // Per layer: qkv and projection (at most 4 C^2, fewer under GQA), the MLP
  // (2 C F, or 3 C F under SwiGLU: 3 bounds both), biases and norms. The
  // table counts twice for an untied output layer.
  const int64_t C4 = checked_mul(4, C, what);
  const int64_t layer = checked_add(checked_add(checked_mul(C4, C, what),
                                                checked_mul(checked_mul(3, C, what), F, what), what),
                                    checked_add(checked_mul(16, C, what), F, what), what);
  const int64_t params = checked_add(checked_mul(2, table, what), checked_mul(m.num_layers, layer, what), what);
  checked_mul(params, 16, what);
}

}  // namespace

void GPTConfig::validate() const {
  TESSERA_CHECK(num_layers >= 1 && num_layers <= kMaxLayers,
                "--num-layers must be in [1, {}] (got {})", kMaxLayers, num_layers);
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
  TESSERA_CHECK(init_std > 0 && std::isfinite(init_std),
                "--init-method-std must be a finite number > 0 (got {})", init_std);
  // The negated form also refuses NaN.
  TESSERA_CHECK(attention_dropout >= 0.0f && attention_dropout < 1.0f,
                "--attention-dropout must be in [0, 1) (got {})", attention_dropout);
  TESSERA_CHECK(hidden_dropout >= 0.0f && hidden_dropout < 1.0f,
                "--hidden-dropout must be in [0, 1) (got {})", hidden_dropout);
  TESSERA_CHECK(norm_epsilon > 0 && std::isfinite(norm_epsilon),
                "--norm-epsilon must be a finite number > 0 (got {})", norm_epsilon);
  TESSERA_CHECK(num_query_groups >= 0, "--num-query-groups must be >= 1 (got {})",
                num_query_groups);
  TESSERA_CHECK(num_query_groups == 0 || num_heads % num_query_groups == 0,
                "--num-attention-heads ({}) must be divisible by --num-query-groups ({})",
                num_heads, num_query_groups);
  TESSERA_CHECK(!rope() || head_size() % 2 == 0,
                "--position-embedding-type rope needs an even head dimension "
                "(--hidden-size / --num-attention-heads = {})",
                head_size());
  TESSERA_CHECK(!rope() || (rotary_base > 1 && std::isfinite(rotary_base)),
                "--rotary-base must be a finite number > 1 (got {})", rotary_base);
  check_sizes_fit(*this);
}

std::string GPTConfig::summary() const {
  std::string s = fmt::format("layers {} hidden {} heads {} ffn {} seq {} vocab {} (padded {})",
                              num_layers, hidden_size, num_heads, ffn(), seq_length, vocab_size,
                              padded_vocab());
  if (llama_family())
    s += fmt::format(" ({}{}{}{}{}{})", rmsnorm() ? "rmsnorm" : "layernorm",
                     swiglu ? " swiglu" : "", rope() ? fmt::format(" rope {}", rotary_base) : "",
                     num_query_groups > 0 ? fmt::format(" gqa {}", num_query_groups) : "",
                     untie_embeddings ? " untied" : "", add_bias_linear ? "" : " no-bias");
  if (attention_dropout > 0 || hidden_dropout > 0)
    s += fmt::format(" dropout attention {} hidden {}", attention_dropout, hidden_dropout);
  return s;
}

}  // namespace tessera
