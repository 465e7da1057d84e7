#include "tessera/config/config_json.h"

#include <fmt/format.h>

#include "tessera/config/field_json.h"
#include "tessera/config/model_fields.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"

namespace tessera {

using nlohmann::json;

// Each field at its default when absent (files written before the field
// existed: no dropout, GPT-2's architecture), except the sizes a model
// needs (Field::required).
constexpr JsonForm kModelForm{.every_key_required = false, .unset_as_zero = false,
                              .check_ranges = false};  // GPTConfig::validate names the flags

json model_to_json(const GPTConfig& m) {
  json j = json::object();
  fields_to_json(model_fields(), kSurfaceCheckpoint, m, kModelForm, j);
  return j;
}

GPTConfig model_from_json(const json& j) {
  GPTConfig m;
  fields_from_json(model_fields(), kSurfaceCheckpoint, j, kModelForm, "model config", m);
  // The MLP width's default, spelled out (compared by division: 4 x a huge
  // hidden wraps; --swiglu has its own default).
  if (!m.swiglu && m.ffn_hidden_size % 4 == 0 && m.ffn_hidden_size / 4 == m.hidden_size)
    m.ffn_hidden_size = 0;
  if (m.swiglu) {
    GPTConfig d = m;
    d.ffn_hidden_size = 0;
    if (m.ffn_hidden_size == d.ffn()) m.ffn_hidden_size = 0;
  }
  m.validate();
  return m;
}

// Each field at its default when absent (files written before the field
// existed: the schedule was 1F1B, the stages even).
constexpr JsonForm kMetadataForm{.every_key_required = false, .unset_as_zero = false,
                                 .check_ranges = true};

json parallel_to_json(const ParallelConfig& p) {
  json j = json::object();
  fields_to_json(parallel_fields(), kSurfaceCheckpoint, p, kMetadataForm, j);
  return j;
}

ParallelConfig parallel_from_json(const json& j) {
  ParallelConfig p;
  fields_from_json(parallel_fields(), kSurfaceCheckpoint, j, kMetadataForm, "parallel config", p);
  return p;
}

std::string model_difference(const GPTConfig& a, const GPTConfig& b) {
  auto diff = [](const char* what, int64_t x, int64_t y) {
    return x == y ? std::string() : fmt::format("{} {} vs {}", what, x, y);
  };
  for (std::string d : {diff("num_layers", a.num_layers, b.num_layers),
                        diff("hidden_size", a.hidden_size, b.hidden_size),
                        diff("num_heads", a.num_heads, b.num_heads),
                        diff("seq_length", a.seq_length, b.seq_length),
                        diff("max_position_embeddings", a.positions(), b.positions()),
                        diff("vocab_size", a.vocab_size, b.vocab_size),
                        diff("ffn_hidden_size", a.ffn(), b.ffn()),
                        // Experts and routing change the parameters or what they compute.
                        diff("num_experts", a.num_experts, b.num_experts),
                        diff("moe_router_topk", a.moe() ? a.moe_router_topk : 0,
                             b.moe() ? b.moe_router_topk : 0),
                        diff("moe_layer_freq", a.moe() ? a.moe_layer_freq : 0,
                             b.moe() ? b.moe_layer_freq : 0),
                        diff("moe_router_pre_softmax", a.moe() && a.moe_router_pre_softmax,
                             b.moe() && b.moe_router_pre_softmax),
                        diff("moe_shared_expert_intermediate_size",
                             a.moe_shared() ? a.moe_shared_expert_intermediate_size : 0,
                             b.moe_shared() ? b.moe_shared_expert_intermediate_size : 0),
                        diff("moe_shared_expert_gate", a.moe_shared() && a.moe_shared_expert_gate,
                             b.moe_shared() && b.moe_shared_expert_gate)})
    if (!d.empty()) return d;
  // The family's switches: each changes the parameters or what they compute.
  auto text = [](const char* what, const std::string& x, const std::string& y) {
    return x == y ? std::string() : fmt::format("{} {} vs {}", what, x, y);
  };
  auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  auto real = [](float v) { return fmt::format("{}", v); };
  for (std::string d :
       {text("normalization", a.rmsnorm() ? "RMSNorm" : "LayerNorm",
             b.rmsnorm() ? "RMSNorm" : "LayerNorm"),
        text("norm_epsilon", real(a.norm_epsilon), real(b.norm_epsilon)),
        text("swiglu", flag(a.swiglu), flag(b.swiglu)),
        text("position_embedding_type", a.rope() ? "rope" : "learned_absolute",
             b.rope() ? "rope" : "learned_absolute"),
        text("rotary_base", real(a.rope() ? a.rotary_base : 0), real(b.rope() ? b.rotary_base : 0)),
        diff("num_query_groups", a.kv_heads(), b.kv_heads()),
        text("untie_embeddings_and_output_weights", flag(a.untie_embeddings),
             flag(b.untie_embeddings)),
        text("add_bias_linear", flag(a.add_bias_linear), flag(b.add_bias_linear)),
        text("qkv bias", flag(a.qkv_bias()), flag(b.qkv_bias()))})
    if (!d.empty()) return d;
  return "";
}

}  // namespace tessera
