#include "tessera/ckpt/hf_llama.h"

#include <cmath>
#include <set>

#include <fmt/core.h>

#include "tessera/ckpt/hf_files.h"
#include "tessera/ckpt/hf_tensors.h"
#include "tessera/ckpt/safetensors.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

// A float setting as the decimal it was written in (1e-05, not
// 9.999999747378752e-06): config.json is read by people too.
double shortest(float x) { return std::stod(fmt::format("{}", x)); }

}  // namespace

bool split_layer(const std::string& ours, std::string* layer, std::string* rest) {
  if (!ours.starts_with("h.")) return false;
  const size_t dot = ours.find('.', 2);
  if (dot == std::string::npos) return false;
  *layer = ours.substr(2, dot - 2);
  *rest = ours.substr(dot + 1);
  return true;
}

std::vector<HfPiece> llama_hf_pieces(const std::string& ours, const GPTConfig& m) {
  const int64_t C = m.hidden_size, hs = m.head_size(), F = m.ffn();
  const int64_t q_rows = m.num_heads * hs, kv_rows = m.kv_heads() * hs;
  if (ours == "wte") return {{"model.embed_tokens.weight", 0, m.vocab_size}};
  if (ours == "lm_head.weight") return {{"lm_head.weight", 0, m.vocab_size}};
  if (ours == "ln_f.weight") return {{"model.norm.weight", 0, C}};
  std::string layer, rest;
  TESSERA_CHECK(split_layer(ours, &layer, &rest), "no Llama name for {}", ours);
  const std::string p = "model.layers." + layer + ".";
  // tail: "weight" or "bias"; the same row blocks for both.
  const size_t dot = rest.rfind('.');
  const std::string part = rest.substr(0, dot), tail = rest.substr(dot + 1);
  TESSERA_CHECK(dot != std::string::npos && (tail == "weight" || tail == "bias") &&
                    !(tail == "bias" && part.starts_with("ln_")),
                "no Llama name for {}", ours);
  if (part == "ln_1") return {{p + "input_layernorm.weight", 0, C}};
  if (part == "ln_2") return {{p + "post_attention_layernorm.weight", 0, C}};
  if (part == "attn.qkv")
    return {{p + "self_attn.q_proj." + tail, 0, q_rows},
            {p + "self_attn.k_proj." + tail, q_rows, kv_rows},
            {p + "self_attn.v_proj." + tail, q_rows + kv_rows, kv_rows}};
  if (part == "attn.proj") return {{p + "self_attn.o_proj." + tail, 0, C}};
  if (part == "mlp.fc")
    return {{p + "mlp.gate_proj." + tail, 0, F}, {p + "mlp.up_proj." + tail, F, F}};
  if (part == "mlp.proj") return {{p + "mlp.down_proj." + tail, 0, C}};
  fail("no Llama name for {}", ours);
}

json llama_hf_config(const GPTConfig& m, int32_t eot_id) {
  json c = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_size", m.hidden_size},
            {"intermediate_size", m.ffn()},
            {"num_attention_heads", m.num_heads},
            {"num_key_value_heads", m.kv_heads()},
            {"head_dim", m.head_size()},
            {"num_hidden_layers", m.num_layers},
            {"max_position_embeddings", m.positions()},
            {"rms_norm_eps", shortest(m.norm_epsilon)},
            {"rope_theta", shortest(m.rotary_base)},
            {"rope_scaling", nullptr},
            {"vocab_size", m.vocab_size},
            {"tie_word_embeddings", !m.untie_embeddings},
            {"attention_bias", m.add_bias_linear},
            {"mlp_bias", m.add_bias_linear},
            {"hidden_act", "silu"},
            {"attention_dropout", 0.0},
            {"pretraining_tp", 1},
            {"initializer_range", m.init_std},
            {"torch_dtype", "float32"}};
  // As the GPT-2 export: the tokenizer's <|endoftext|> starts and ends documents.
  if (eot_id >= 0) c["bos_token_id"] = c["eos_token_id"] = eot_id;
  return c;
}

GPTConfig model_from_llama_hf_config(const json& c) {
  TESSERA_CHECK(c.is_object(), "config.json: not a JSON object");
  auto integer = [&](const char* k) { return config_integer(c, k); };
  auto number = [&](const char* k, double def) { return config_number(c, k, def); };
  auto boolean = [&](const char* k, bool def) { return config_boolean(c, k, def); };
  GPTConfig m;
  m.normalization = Normalization::RMSNorm;
  m.swiglu = true;
  m.position_embedding = PositionEmbedding::Rope;
  m.num_layers = integer("num_hidden_layers");
  m.hidden_size = integer("hidden_size");
  m.num_heads = integer("num_attention_heads");
  m.ffn_hidden_size = integer("intermediate_size");
  // 0 would mean "the default width" to us, not to the file.
  TESSERA_CHECK(m.ffn_hidden_size >= 1, "config.json: intermediate_size must be >= 1 (got {})",
                m.ffn_hidden_size);
  m.vocab_size = integer("vocab_size");
  m.seq_length = integer("max_position_embeddings");
  m.max_position_embeddings = m.seq_length;
  // Hugging Face's default: one kv head per query head (MHA).
  const int64_t kv = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()
                         ? integer("num_key_value_heads")
                         : m.num_heads;
  TESSERA_CHECK(kv >= 1 && m.num_heads >= 1 && m.num_heads % kv == 0,
                "config.json: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                m.num_heads, kv);
  m.num_query_groups = kv == m.num_heads ? 0 : kv;
  m.norm_epsilon = float(number("rms_norm_eps", 1e-6));  // LlamaConfig's default
  m.rotary_base = float(number("rope_theta", 10000.0));
  m.init_std = float(number("initializer_range", 0.02));
  m.untie_embeddings = !boolean("tie_word_embeddings", false);  // LlamaConfig's default: untied

  // What this engine cannot compute, one key at a time.
  TESSERA_CHECK(!c.contains("hidden_act") || c["hidden_act"].is_string(),
                "config.json: 'hidden_act' has the wrong type ({})", c.value("hidden_act", json()).dump());
  const std::string act = c.value("hidden_act", std::string("silu"));
  TESSERA_CHECK(act == "silu", "config.json: hidden_act '{}' (this engine computes SwiGLU with silu)",
                act);
  // null, or {"rope_type": "default"} (newer transformers' name for none).
  const json scaling = c.value("rope_scaling", json());
  const bool plain_rope =
      scaling.is_null() ||
      (scaling.is_object() && scaling.size() == 1 &&
       scaling.value("rope_type", scaling.value("type", json())) == json("default"));
  TESSERA_CHECK(plain_rope,
                "config.json: rope_scaling {} (this engine computes plain rotary positions, no "
                "scaling)",
                scaling.dump());
  TESSERA_CHECK(m.num_heads >= 1 && m.hidden_size % m.num_heads == 0,
                "config.json: hidden_size ({}) must be a multiple of num_attention_heads ({})",
                m.hidden_size, m.num_heads);
  if (c.contains("head_dim") && !c["head_dim"].is_null()) {
    const int64_t hd = integer("head_dim");
    TESSERA_CHECK(hd == m.hidden_size / m.num_heads,
                  "config.json: head_dim {} (this engine's heads are hidden_size / "
                  "num_attention_heads = {})",
                  hd, m.hidden_size / m.num_heads);
  }
  const bool attn_bias = boolean("attention_bias", false);
  // Absent before transformers 4.41, whose MLPs had no biases.
  const bool mlp_bias = boolean("mlp_bias", false);
  TESSERA_CHECK(attn_bias == mlp_bias,
                "config.json: attention_bias {} but mlp_bias {} (this engine's biases are on every "
                "linear layer or on none)",
                attn_bias, mlp_bias);
  m.add_bias_linear = attn_bias;
  m.validate();
  return m;
}

namespace {

void check_llama_whole(const GPT& model, const char* family) {
  const ParamLayout& L = model.layout();
  const GPTConfig& m = model.config();
  TESSERA_CHECK(L.tp() == 1 && L.has_embedding() && L.has_head(),
                "{} export/import works on a whole model (tp = 1, one stage)", family);
  TESSERA_CHECK(m.rmsnorm() && m.swiglu && m.rope(),
                "{} export/import needs RMSNorm, SwiGLU and rotary positions ({})", family,
                m.summary());
}

// The elements per row of a tensor of ours (1 for a bias or a norm weight):
// its last dim. A stacked (E, rows, cols) expert tensor is E x rows rows.
int64_t row_size(const ParamEntry& e) {
  return e.global_shape.ndim >= 2 ? e.global_shape[e.global_shape.ndim - 1] : 1;
}

// The shape of one piece in the file.
std::vector<int64_t> piece_shape(const ParamEntry& e, const HfPiece& p) {
  if (e.global_shape.ndim >= 2) return {p.rows, row_size(e)};
  return {p.rows};
}

// Older transformers saved each layer's rotary inverse frequencies: a
// buffer, not a parameter. Accepted for layers the model has.
bool is_rotary_buffer(const std::string& bare, int64_t num_layers) {
  const std::string pre = "layers.", post = ".self_attn.rotary_emb.inv_freq";
  if (!bare.starts_with(pre) || !bare.ends_with(post)) return false;
  const std::string n = bare.substr(pre.size(), bare.size() - pre.size() - post.size());
  if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return std::stoll(n) < num_layers;
}

std::string without_prefix(const std::string& name) {
  const std::string prefix = "model.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

}  // namespace

void export_hf_llama(const GPT& model, const std::string& out_dir, int32_t eot_id,
                     uint64_t max_shard_bytes) {
  export_llama_family(model, out_dir, llama_hf_pieces, llama_hf_config(model.config(), eot_id),
                      max_shard_bytes, "Llama");
}

void import_hf_llama(const std::string& path, GPT& model) {
  import_llama_family(path, model, llama_hf_pieces, "Llama");
}

void export_llama_family(const GPT& model, const std::string& out_dir, HfPiecesOf pieces,
                         const json& config, uint64_t max_shard_bytes, const char* family) {
  check_llama_whole(model, family);
  prepare_export_dir(out_dir);
  const float* base = const_cast<GPT&>(model).params().f32();
  SafetensorsWriter w;  // points into the parameters: whole row blocks, no copies
  for (const ParamEntry& e : model.layout().entries())
    for (const HfPiece& p : pieces(e.name, model.config()))
      w.add(p.name, piece_shape(e, p), base + e.offset + p.row0 * row_size(e));
  write_export(w, out_dir, config, max_shard_bytes);
}

void import_llama_family(const std::string& path, GPT& model, HfPiecesOf pieces,
                         const char* family) {
  check_llama_whole(model, family);
  const GPTConfig& m = model.config();
  const HfTensors f(path);  // one file or the shards of an index
  // Every tensor of the file must find a place (see import_hf_gpt2).
  std::set<std::string> unused;
  for (const auto& [name, e] : f.entries()) unused.insert(name);
  float* base = model.params().f32();
  model.params().zero();
  std::string embed;  // the file's name of the embedding
  for (const ParamEntry& e : model.layout().entries())
    for (const HfPiece& p : pieces(e.name, m)) {
      std::string name = p.name;
      // The base LlamaModel's state dict has no "model." prefix.
      if (!f.contains(name) && f.contains(without_prefix(name))) name = without_prefix(name);
      TESSERA_CHECK(f.contains(name), "{}: no tensor {} (for {}){}", f.source(), name, e.name,
                    e.name == "lm_head.weight" ? " (config.json's tie_word_embeddings is false)" : "");
      unused.erase(name);
      if (e.name == "wte") embed = name;
      const std::vector<int64_t> want = piece_shape(e, p);
      TESSERA_CHECK(f.at(name).shape == want, "{}: tensor {} has shape {} but the model needs {}",
                    f.file_of(name), name, json(f.at(name).shape).dump(), json(want).dump());
      const std::vector<float> v = f.to_f32(name);
      std::copy(v.begin(), v.end(), base + e.offset + p.row0 * row_size(e));
    }
  // A tied model's head saved twice is fine only if it is the embedding bit
  // for bit: anything else would change every logit when dropped.
  if (!m.untie_embeddings && unused.erase("lm_head.weight"))
    TESSERA_CHECK(f.at("lm_head.weight").shape == f.at(embed).shape &&
                      f.to_f32("lm_head.weight") == f.to_f32(embed),
                  "{}: lm_head.weight differs from {} but config.json says tie_word_embeddings "
                  "true: set it false to import the untied head",
                  f.file_of("lm_head.weight"), embed);
  std::vector<std::string> unplaced;
  for (const std::string& name : unused)
    if (!is_rotary_buffer(without_prefix(name), m.num_layers)) unplaced.push_back(name);
  refuse_unplaced(f.source(), m, unplaced);
}

}  // namespace tessera::ckpt
