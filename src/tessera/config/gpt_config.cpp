#include "tessera/config/gpt_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/config/model_fields.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

// An upper bound of the model's parameter bytes (fp32 weights, gradients and
// Adam's two moments: 16 per parameter) computed without wrapping, so that
// no size derived from this config (ParamLayout's offsets, the planner's
// byte counts) can overflow int64. The exact count is ParamLayout's; this
// only has to be larger.
void check_sizes_fit(const GPTConfig& m) {
  const std::string text = fmt::format("model size ({}, {}, {}, vocabulary)", flag::hidden_size,
                                       flag::ffn_hidden_size, flag::num_layers);
  const char* what = text.c_str();
  const int64_t C = m.hidden_size;
  const int64_t F = m.ffn_hidden_size > 0 ? m.ffn_hidden_size : checked_mul(4, C, what);
  const int64_t rows = checked_add(m.vocab_size, m.make_vocab_size_divisible_by, what);
  const int64_t table = checked_mul(checked_add(rows, m.positions(), what), C, what);
  // Per layer: qkv and projection (at most 4 C^2, fewer under GQA), the MLP
  // (2 C F, or 3 C F under SwiGLU: 3 bounds both), biases and norms. The
  // table counts twice for an untied output layer.
  const int64_t C4 = checked_mul(4, C, what);
  // E experts (and their router) in place of one MLP.
  const int64_t mlps = std::max<int64_t>(m.num_experts, 1) + (m.moe() ? 1 : 0);
  // and the shared expert, one MLP of width S (3 C S bounds it too)
  const int64_t shared = checked_mul(checked_mul(3, C, what),
                                     checked_add(m.moe_shared_expert_intermediate_size, 1, what), what);
  const int64_t layer = checked_add(checked_add(checked_add(checked_mul(C4, C, what),
                                                checked_mul(checked_mul(checked_mul(3, C, what), F, what), mlps, what), what), shared, what),
                                    checked_add(checked_mul(16, C, what), F, what), what);
  const int64_t params = checked_add(checked_mul(2, table, what), checked_mul(m.num_layers, layer, what), what);
  checked_mul(params, 16, what);
}

void check_moe(const GPTConfig& m) {
  check_field_range(model_field(flag::num_experts), m.num_experts);
  check_field_range(model_field(flag::moe_shared_size), m.moe_shared_expert_intermediate_size);
  // A shared expert lives in the MoE layers: none without experts.
  TESSERA_CHECK(m.moe_shared_expert_intermediate_size == 0 || m.moe(), "{} needs {}",
                flag::moe_shared_size, flag::num_experts);
  TESSERA_CHECK(!m.moe_shared_expert_gate || m.moe_shared(), "{} needs {} > 0",
                flag::moe_shared_gate, flag::moe_shared_size);
  // A routing switch: said without experts it would be silently dropped.
  TESSERA_CHECK(!m.moe_router_pre_softmax || m.moe(), "{} needs {}", flag::moe_router_pre_softmax,
                flag::num_experts);
  if (!m.moe()) return;
  check_field_range(model_field(flag::moe_layer_freq), m.moe_layer_freq);
  check_field_range(model_field(flag::moe_router_topk), m.moe_router_topk);
  TESSERA_CHECK(m.moe_router_topk <= m.num_experts, "{} ({}) must be <= {} ({})",
                flag::moe_router_topk, m.moe_router_topk, flag::num_experts, m.num_experts);
  // The negated forms also refuse NaN.
  TESSERA_CHECK(m.moe_dropless() || (m.moe_capacity_factor > 0 && std::isfinite(m.moe_capacity_factor)),
                "{} must be a finite number > 0 (got {})", flag::moe_capacity_factor,
                m.moe_capacity_factor);
  TESSERA_CHECK(m.moe_aux_loss_coeff >= 0 && std::isfinite(m.moe_aux_loss_coeff),
                "{} must be a finite number >= 0 (got {})", flag::moe_aux_loss_coeff,
                m.moe_aux_loss_coeff);
  TESSERA_CHECK(m.moe_z_loss_coeff >= 0 && std::isfinite(m.moe_z_loss_coeff),
                "{} must be a finite number >= 0 (got {})", flag::moe_z_loss_coeff,
                m.moe_z_loss_coeff);
}

}  // namespace

void GPTConfig::validate() const {
  // Each size's range is its field's (config/model_fields.cpp).
  auto range = [](const char* flag, int64_t v) { check_field_range(model_field(flag), v); };
  range(flag::num_layers, num_layers);
  range(flag::hidden_size, hidden_size);
  range(flag::num_heads, num_heads);
  TESSERA_CHECK(hidden_size % num_heads == 0,
                "{} ({}) must be divisible by {} ({})", flag::hidden_size, hidden_size,
                flag::num_heads, num_heads);
  range(flag::seq_length, seq_length);
  TESSERA_CHECK(max_position_embeddings == 0 || max_position_embeddings >= seq_length,
                "{} ({}) must be >= {} ({})", flag::max_positions, max_position_embeddings,
                flag::seq_length, seq_length);
  TESSERA_CHECK(vocab_size >= 2, "vocabulary size must be >= 2 (got {})", vocab_size);
  TESSERA_CHECK(vocab_size < (int64_t(1) << 31), "vocabulary size {} does not fit int32 token ids",
                vocab_size);
  range(flag::ffn_hidden_size, ffn_hidden_size);
  range(flag::vocab_divisor, make_vocab_size_divisible_by);
  TESSERA_CHECK(init_std > 0 && std::isfinite(init_std),
                "{} must be a finite number > 0 (got {})", flag::init_std, init_std);
  // The negated form also refuses NaN.
  TESSERA_CHECK(attention_dropout >= 0.0f && attention_dropout < 1.0f,
                "{} must be in [0, 1) (got {})", flag::attention_dropout, attention_dropout);
  TESSERA_CHECK(hidden_dropout >= 0.0f && hidden_dropout < 1.0f,
                "{} must be in [0, 1) (got {})", flag::hidden_dropout, hidden_dropout);
  TESSERA_CHECK(norm_epsilon > 0 && std::isfinite(norm_epsilon),
                "{} must be a finite number > 0 (got {})", flag::norm_epsilon, norm_epsilon);
  range(flag::num_query_groups, num_query_groups);
  TESSERA_CHECK(num_query_groups == 0 || num_heads % num_query_groups == 0,
                "{} ({}) must be divisible by {} ({})", flag::num_heads, num_heads,
                flag::num_query_groups, num_query_groups);
  TESSERA_CHECK(!rope() || head_size() % 2 == 0,
                "{} rope needs an even head dimension ({} / {} = {})", flag::position_embedding,
                flag::hidden_size, flag::num_heads, head_size());
  TESSERA_CHECK(!rope() || (rotary_base > 1 && std::isfinite(rotary_base)),
                "{} must be a finite number > 1 (got {})", flag::rotary_base, rotary_base);
  check_moe(*this);
  check_sizes_fit(*this);
}

int64_t GPTConfig::moe_capacity(int64_t tokens) const {
  // An expert can take each token once: `tokens` is no limit at all.
  if (moe_dropless()) return tokens;
  const double per_expert = double(tokens) * double(moe_router_topk) / double(num_experts);
  return std::min<int64_t>(int64_t(std::ceil(per_expert * double(moe_capacity_factor))), tokens);
}

std::string GPTConfig::summary() const {
  std::string s = fmt::format("layers {} hidden {} heads {} ffn {} seq {} vocab {} (padded {})",
                              num_layers, hidden_size, num_heads, ffn(), seq_length, vocab_size,
                              padded_vocab());
  if (llama_family())
    s += fmt::format(" ({}{}{}{}{}{})", rmsnorm() ? "rmsnorm" : "layernorm",
                     swiglu ? " swiglu" : "", rope() ? fmt::format(" rope {}", rotary_base) : "",
                     num_query_groups > 0 ? fmt::format(" gqa {}", num_query_groups) : "",
                     untie_embeddings ? " untied" : "",
                     add_bias_linear ? "" : add_qkv_bias ? " qkv-bias only" : " no-bias");
  if (moe())
    s += fmt::format(" moe {} experts top-{}{} every {} layer(s){}", num_experts, moe_router_topk,
                     moe_router_pre_softmax ? " pre-softmax" : "", moe_layer_freq,
                     moe_dropless() ? "" : fmt::format(" capacity {}", moe_capacity_factor));
  if (moe_shared())
    s += fmt::format(" shared expert {}{}", moe_shared_expert_intermediate_size,
                     moe_shared_expert_gate ? " gated" : "");
  if (attention_dropout > 0 || hidden_dropout > 0)
    s += fmt::format(" dropout attention {} hidden {}", attention_dropout, hidden_dropout);
  return s;
}

}  // namespace tessera
