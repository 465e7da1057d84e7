#include "tessera/ckpt/hf_gpt2.h"

#include <cmath>
#include <set>

#include "tessera/ckpt/hf_files.h"
#include "tessera/ckpt/hf_tensors.h"
#include "tessera/ckpt/safetensors.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

std::string hf_name(const std::string& ours, bool* transpose) {
  *transpose = false;
  if (ours == "wte" || ours == "wpe") return "transformer." + ours + ".weight";
  if (ours.starts_with("ln_f.")) return "transformer." + ours;
  // "h.N.<rest>"
  const size_t dot = ours.find('.', 2);
  TESSERA_CHECK(ours.starts_with("h.") && dot != std::string::npos, "no GPT-2 name for {}", ours);
  const std::string layer = ours.substr(0, dot), rest = ours.substr(dot + 1);
  static const std::pair<const char*, const char*> kMap[] = {
      {"attn.qkv.", "attn.c_attn."}, {"attn.proj.", "attn.c_proj."},
      {"mlp.fc.", "mlp.c_fc."},      {"mlp.proj.", "mlp.c_proj."}};
  for (const auto& [a, b] : kMap)
    if (rest.starts_with(a)) {
      std::string tail = rest.substr(std::string(a).size());
      *transpose = tail == "weight";
      return "transformer." + layer + "." + b + tail;
    }
  return "transformer." + ours;  // ln_1.*, ln_2.*
}

json hf_config(const GPTConfig& m, int32_t eot_id) {
  json c = {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_layer", m.num_layers},
          {"n_embd", m.hidden_size},
          {"n_head", m.num_heads},
          {"n_positions", m.positions()},
          {"n_ctx", m.positions()},
          {"n_inner", m.ffn() == 4 * m.hidden_size ? json(nullptr) : json(m.ffn())},
          {"vocab_size", m.vocab_size},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"initializer_range", m.init_std},
          {"torch_dtype", "float32"}};
  // GPT-2 starts and ends documents with the one <|endoftext|> token.
  if (eot_id >= 0) c["bos_token_id"] = c["eos_token_id"] = eot_id;
  return c;
}

GPTConfig model_from_hf_config(const json& c) {
  TESSERA_CHECK(c.is_object(), "config.json: not a JSON object");
  auto need = [&](const char* k) { return config_integer(c, k); };
  GPTConfig m;
  m.num_layers = need("n_layer");
  m.hidden_size = need("n_embd");
  m.num_heads = need("n_head");
  m.seq_length = c.contains("n_positions") ? need("n_positions") : need("n_ctx");
  m.max_position_embeddings = m.seq_length;
  m.vocab_size = need("vocab_size");
  // n_inner: null (Hugging Face's "4 x n_embd") or an integer.
  if (c.contains("n_inner") && !c["n_inner"].is_null()) m.ffn_hidden_size = need("n_inner");
  m.init_std = float(config_number(c, "initializer_range", m.init_std));
  // Optional fields, typed: a wrong type names the field (not a type_error).
  TESSERA_CHECK(!c.contains("activation_function") || c["activation_function"].is_string(),
                "config.json: '{}' has the wrong type ({})", "activation_function",
                c["activation_function"].dump());
  const double eps = config_number(c, "layer_norm_epsilon", 1e-5);
  const bool tied = config_boolean(c, "tie_word_embeddings", true);
  const std::string act = c.value("activation_function", std::string("gelu_new"));
  TESSERA_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh",
                "config.json: activation_function '{}' (this engine computes gelu_new, the tanh GELU)",
                act);
  TESSERA_CHECK(std::fabs(eps - 1e-5) < 1e-12,
                "config.json: layer_norm_epsilon {} (this engine uses 1e-5)", eps);
  TESSERA_CHECK(tied, "config.json: untied LM head is not supported");
  m.validate();
  return m;
}

namespace {

void check_whole(const GPT& model) {
  const ParamLayout& L = model.layout();
  TESSERA_CHECK(L.tp() == 1 && L.has_embedding() && L.has_head(),
                "GPT-2 export/import works on a whole model (tp = 1, one stage)");
  // Any of the Llama family's switches changes the tensors (SwiGLU's and
  // GQA's shapes too, which the layout checks below would not see).
  TESSERA_CHECK(!model.config().llama_family() && !L.contains("lm_head.weight") &&
                    L.contains("wpe") && L.contains("ln_f.bias") &&
                    L.contains("h." + std::to_string(L.layers().front()) + ".attn.qkv.bias"),
                "GPT-2 export/import: this model has Llama-family settings ({}), which GPT-2's "
                "format cannot hold",
                model.config().summary());
}

// (rows, cols) -> (cols, rows)
std::vector<float> transposed(const float* x, int64_t rows, int64_t cols) {
  std::vector<float> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[size_t(c * rows + r)] = x[r * cols + c];
  return t;
}

}  // namespace

void export_hf_gpt2(const GPT& model, const std::string& out_dir, int32_t eot_id,
                    uint64_t max_shard_bytes) {
  const ParamLayout& L = model.layout();
  check_whole(model);
  prepare_export_dir(out_dir);
  const float* base = const_cast<GPT&>(model).params().f32();
  SafetensorsWriter w;
  std::vector<std::vector<float>> keep;  // transposed copies, alive until write()
  for (const ParamEntry& e : L.entries()) {
    bool tr;
    const std::string name = hf_name(e.name, &tr);
    const float* p = base + e.offset;
    if (e.name == "wte") {
      // Only real vocabulary rows: the padding is our layout's business.
      w.add(name, {model.config().vocab_size, e.global_shape[1]}, p);
    } else if (tr) {
      keep.push_back(transposed(p, e.global_shape[0], e.global_shape[1]));
      w.add(name, {e.global_shape[1], e.global_shape[0]}, keep.back().data());
    } else {
      std::vector<int64_t> shape(e.global_shape.dims.begin(),
                                 e.global_shape.dims.begin() + e.global_shape.ndim);
      w.add(name, shape, p);
    }
  }
  write_export(w, out_dir, hf_config(model.config(), eot_id), max_shard_bytes);
}

namespace {

// Tensors of GPT-2 files that carry no parameter: the causal-mask buffers
// older transformers versions saved (h.N.attn.bias (1, 1, P, P),
// h.N.attn.masked_bias ()). Accepted for layers the model has.
bool is_mask_buffer(const std::string& bare, int64_t num_layers) {
  if (!bare.starts_with("h.")) return false;
  const size_t dot = bare.find('.', 2);
  if (dot == std::string::npos) return false;
  const std::string rest = bare.substr(dot + 1);
  if (rest != "attn.bias" && rest != "attn.masked_bias") return false;
  try {
    size_t used = 0;
    const int64_t layer = std::stoll(bare.substr(2, dot - 2), &used);
    return used == dot - 2 && layer >= 0 && layer < num_layers;
  } catch (const std::exception&) {
    return false;
  }
}

std::string without_prefix(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

// An lm_head.weight is only the tied embedding written twice if it equals
// wte bit for bit; anything else is a separate head this model cannot hold,
// and dropping it would silently change every logit.
void check_head_is_tied(const HfTensors& f, const std::string& head, const std::string& wte) {
  const SafetensorsEntry& h = f.at(head);
  const SafetensorsEntry& w = f.at(wte);
  TESSERA_CHECK(h.shape == w.shape && f.to_f32(head) == f.to_f32(wte),
                "{}: {} differs from {} (an untied LM head): this engine ties the head to the "
                "embedding and cannot import it",
                f.file_of(head), head, wte);
}

}  // namespace

void import_hf_gpt2(const std::string& path, GPT& model) {
  const ParamLayout& L = model.layout();
  check_whole(model);
  const HfTensors f(path);  // one file or the shards of an index
  // Every tensor of the file must find a place: a tensor left over means the
  // file is another model (more layers, an untied head), and importing the
  // rest would train something else than the file holds.
  std::set<std::string> unused;
  for (const auto& [name, e] : f.entries()) unused.insert(name);
  float* base = model.params().f32();
  model.params().zero();
  std::string wte_name;
  for (const ParamEntry& e : L.entries()) {
    bool tr;
    std::string name = hf_name(e.name, &tr);
    // The base GPT2Model's state dict (e.g. the hub's gpt2) has no prefix.
    if (!f.contains(name) && f.contains(without_prefix(name))) name = without_prefix(name);
    TESSERA_CHECK(f.contains(name), "{}: no tensor {} (for {})", f.source(), name, e.name);
    unused.erase(name);
    if (e.name == "wte") wte_name = name;
    const SafetensorsEntry& se = f.at(name);
    std::vector<int64_t> want(e.global_shape.dims.begin(),
                              e.global_shape.dims.begin() + e.global_shape.ndim);
    if (e.name == "wte") want[0] = model.config().vocab_size;
    if (tr) std::swap(want[0], want[1]);
    TESSERA_CHECK(se.shape == want, "{}: tensor {} has shape {} but the model needs {}",
                  f.file_of(name), name, json(se.shape).dump(), json(want).dump());
    std::vector<float> v = f.to_f32(name);
    if (tr) v = transposed(v.data(), want[0], want[1]);
    std::copy(v.begin(), v.end(), base + e.offset);  // wte: real rows; padding stays zero
  }
  if (unused.erase("lm_head.weight")) check_head_is_tied(f, "lm_head.weight", wte_name);
  std::vector<std::string> unknown;
  for (const std::string& name : unused)
    if (!is_mask_buffer(without_prefix(name), model.config().num_layers)) unknown.push_back(name);
  refuse_unplaced(f.source(), model.config(), unknown);
}

}  // namespace tessera::ckpt
