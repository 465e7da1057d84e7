#include "tessera/config/config_json.h"

#include <fmt/format.h>

#include "tessera/config/field_json.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"

namespace tessera {

using nlohmann::json;

namespace {

// Typed reads: a field of the wrong type (a string where a number belongs)
// is an Error naming the field, never nlohmann's type_error escaping.
// `what` names the object ("model config"); callers prefix the file.
int64_t need_int(const json& j, const char* key, const char* what = "model config") {
  TESSERA_CHECK(j.is_object() && j.contains(key) && j[key].is_number_integer(),
                "{}: missing integer '{}'", what, key);
  return j[key].get<int64_t>();
}

int64_t int_or(const json& j, const char* key, int64_t fallback, const char* what) {
  if (!j.contains(key)) return fallback;
  TESSERA_CHECK(j[key].is_number_integer(), "{}: '{}' must be an integer (got {})", what, key,
                j[key].dump());
  return j[key].get<int64_t>();
}

double number_or(const json& j, const char* key, double fallback, const char* what) {
  if (!j.contains(key)) return fallback;
  TESSERA_CHECK(j[key].is_number(), "{}: '{}' must be a number (got {})", what, key,
                j[key].dump());
  return j[key].get<double>();
}

std::string string_or(const json& j, const char* key, const std::string& fallback,
                      const char* what) {
  if (!j.contains(key)) return fallback;
  TESSERA_CHECK(j[key].is_string(), "{}: '{}' must be a string (got {})", what, key,
                j[key].dump());
  return j[key].get<std::string>();
}

bool bool_or(const json& j, const char* key, bool fallback, const char* what) {
  if (!j.contains(key)) return fallback;
  TESSERA_CHECK(j[key].is_boolean(), "{}: '{}' must be true or false (got {})", what, key,
                j[key].dump());
  return j[key].get<bool>();
}


}  // namespace

// The Llama family's fields, each written only when it differs from GPT-2's
// default, so a GPT checkpoint's metadata reads as it always has (and files
// written before the family existed read back as GPT-2).
void family_to_json(const GPTConfig& m, json& j) {
  const GPTConfig gpt;
  if (m.rmsnorm()) j["normalization"] = "RMSNorm";
  if (m.norm_epsilon != gpt.norm_epsilon) j["norm_epsilon"] = m.norm_epsilon;
  if (m.swiglu) j["swiglu"] = true;
  if (m.rope()) {
    j["position_embedding_type"] = "rope";
    j["rotary_base"] = m.rotary_base;
  }
  if (m.num_query_groups > 0) j["num_query_groups"] = m.num_query_groups;
  if (m.untie_embeddings) j["untie_embeddings_and_output_weights"] = true;
  if (!m.add_bias_linear) j["add_bias_linear"] = false;
}

void family_from_json(const json& j, GPTConfig& m, const char* what) {
  const std::string norm = string_or(j, "normalization", "LayerNorm", what);
  TESSERA_CHECK(norm == "LayerNorm" || norm == "RMSNorm",
                "{}: 'normalization' must be LayerNorm or RMSNorm (got '{}')", what, norm);
  m.normalization = norm == "RMSNorm" ? Normalization::RMSNorm : Normalization::LayerNorm;
  m.norm_epsilon = float(number_or(j, "norm_epsilon", m.norm_epsilon, what));
  m.swiglu = bool_or(j, "swiglu", false, what);
  const std::string pos = string_or(j, "position_embedding_type", "learned_absolute", what);
  TESSERA_CHECK(pos == "learned_absolute" || pos == "rope",
                "{}: 'position_embedding_type' must be learned_absolute or rope (got '{}')", what,
                pos);
  m.position_embedding = pos == "rope" ? PositionEmbedding::Rope : PositionEmbedding::Learned;
  m.rotary_base = float(number_or(j, "rotary_base", m.rotary_base, what));
  m.num_query_groups = int_or(j, "num_query_groups", 0, what);
  m.untie_embeddings = bool_or(j, "untie_embeddings_and_output_weights", false, what);
  m.add_bias_linear = bool_or(j, "add_bias_linear", true, what);
}
json model_to_json(const GPTConfig& m) {
  json j = {{"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"num_heads", m.num_heads},
          {"seq_length", m.seq_length},
          {"max_position_embeddings", m.positions()},
          {"vocab_size", m.vocab_size},
          {"ffn_hidden_size", m.ffn()},
          {"make_vocab_size_divisible_by", m.make_vocab_size_divisible_by},
          {"init_std", m.init_std},
          {"attention_dropout", m.attention_dropout},
          {"hidden_dropout", m.hidden_dropout}};
  family_to_json(m, j);
  return j;
}

GPTConfig model_from_json(const json& j) {
  const char* what = "model config";
  TESSERA_CHECK(j.is_object(), "{} is not an object (got {})", what, j.dump());
  GPTConfig m;
  m.num_layers = need_int(j, "num_layers");
  m.hidden_size = need_int(j, "hidden_size");
  m.num_heads = need_int(j, "num_heads");
  m.seq_length = need_int(j, "seq_length");
  if (j.contains("max_position_embeddings"))
    m.max_position_embeddings = need_int(j, "max_position_embeddings");
  m.vocab_size = need_int(j, "vocab_size");
  family_from_json(j, m, what);  // before the MLP width: --swiglu has its own default
  m.ffn_hidden_size = int_or(j, "ffn_hidden_size", 0, what);
  // The default, spelled out (compared by division: 4 x a huge hidden wraps).
  if (!m.swiglu && m.ffn_hidden_size % 4 == 0 && m.ffn_hidden_size / 4 == m.hidden_size)
    m.ffn_hidden_size = 0;
  if (m.swiglu) {
    GPTConfig d = m;
    d.ffn_hidden_size = 0;
    if (m.ffn_hidden_size == d.ffn()) m.ffn_hidden_size = 0;
  }
  m.make_vocab_size_divisible_by = int_or(j, "make_vocab_size_divisible_by", 128, what);
  m.init_std = float(number_or(j, "init_std", 0.02, what));
  // Absent: written before dropout existed.
  m.attention_dropout = float(number_or(j, "attention_dropout", 0.0, what));
  m.hidden_dropout = float(number_or(j, "hidden_dropout", 0.0, what));
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
                        diff("ffn_hidden_size", a.ffn(), b.ffn())})
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
        text("add_bias_linear", flag(a.add_bias_linear), flag(b.add_bias_linear))})
    if (!d.empty()) return d;
  return "";
}

}  // namespace tessera
