#include "tessera/plan/model_presets.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <filesystem>
#include <toml++/toml.h>

#include "tessera/config/model_fields.h"
#include "tessera/core/edit_distance.h"
#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"

namespace tessera::plan {

namespace {

// GPT-2's BPE vocabulary; the engine pads it (GPTConfig::padded_vocab).
constexpr int64_t kGpt2Vocab = 50257;

ModelPreset make(const char* name, const char* source, int64_t layers, int64_t hidden,
                 int64_t heads, int64_t seq) {
  ModelPreset p;
  p.name = name;
  p.source = source;
  p.config.num_layers = layers;
  p.config.hidden_size = hidden;
  p.config.num_heads = heads;
  p.config.seq_length = seq;
  p.config.vocab_size = kGpt2Vocab;
  return p;
}

// A Llama-family model as Megatron-LM trains one: RMSNorm (eps 1e-5),
// SwiGLU, rotary positions, grouped-query attention, untied output layer, no
// linear biases.
ModelPreset make_llama(const char* name, const char* source, int64_t layers, int64_t hidden,
                       int64_t heads, int64_t kv_heads, int64_t ffn, int64_t seq, int64_t vocab,
                       float rotary_base) {
  ModelPreset p = make(name, source, layers, hidden, heads, seq);
  GPTConfig& c = p.config;
  c.vocab_size = vocab;
  c.ffn_hidden_size = ffn;
  c.normalization = Normalization::RMSNorm;
  c.norm_epsilon = 1e-5f;
  c.swiglu = true;
  c.position_embedding = PositionEmbedding::Rope;
  c.rotary_base = rotary_base;
  c.num_query_groups = kv_heads;
  c.untie_embeddings = true;
  c.add_bias_linear = false;
  return p;
}

// Llama 3's batch at the end of pre-training: 16M tokens, 2048 sequences of
// 8192 ("The Llama 3 Herd of Models" §3.4.1, for 405B; the paper gives no
// other size's, so the smaller presets take the same).
ModelPreset with_batch(ModelPreset p, int64_t global_batch) {
  p.global_batch = global_batch;
  return p;
}

// A mixture-of-experts model in the Llama family (Mixtral, Qwen-MoE,
// DeepSeek): E experts of the given width per layer, top-k routing, no
// capacity limit (dropless, as Megatron's Mixtral recipe trains).
ModelPreset make_moe(ModelPreset p, int64_t experts, int64_t topk, int64_t shared = 0,
                     bool shared_gate = false) {
  p.config.num_experts = experts;
  p.config.moe_router_topk = topk;
  // A shared expert of width `shared` beside the routed ones (0: none).
  p.config.moe_shared_expert_intermediate_size = shared;
  p.config.moe_shared_expert_gate = shared_gate;
  return p;
}

// Qwen's attention and routing (Qwen2 / Qwen2-MoE config.json): q, k, v
// biases (--add-qkv-bias) and norm_topk_prob false, the gates the full
// softmax's top-k (--moe-router-pre-softmax).
ModelPreset qwen_moe(ModelPreset p) {
  p.config.add_qkv_bias = true;
  p.config.moe_router_pre_softmax = true;
  return p;
}

// Llama 3's tokenizer: 128,000 BPE tokens and 256 reserved special ones.
constexpr int64_t kLlama3Vocab = 128256;
// The tokenizer of the embedded fortunes corpus (`tessera train`'s data
// when a run names none).
constexpr int64_t kEmbeddedCorpusVocab = 4096;


}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      // Dash et al. 2024, "Optimizing Distributed Training on Frontier for LLMs".
      make("frontier-22b", "Dash et al. 2024", 48, 6144, 48, 2048),
      make("frontier-175b", "Dash et al. 2024", 96, 12288, 96, 2048),
      make("frontier-1t", "Dash et al. 2024 (200 heads)", 128, 25600, 200, 2048),
      make("frontier-1t-128h", "Dash et al. 2024, earlier runs (128 heads)", 128, 25600, 128, 2048),
      // Korthikanti et al. 2022, "Reducing Activation Recomputation", Table 3.
      make("mt-22b", "Korthikanti et al. 2022", 48, 6144, 64, 2048),
      make("mt-175b", "Korthikanti et al. 2022 (GPT-3)", 96, 12288, 96, 2048),
      make("mt-530b", "Korthikanti et al. 2022", 105, 20480, 128, 2048),
      make("mt-1t", "Korthikanti et al. 2022", 128, 25600, 160, 2048),
      // GPT-2 (Radford et al. 2019), context 1024.
      make("gpt2-small", "Radford et al. 2019", 12, 768, 12, 1024),
      make("gpt2-medium", "Radford et al. 2019", 24, 1024, 16, 1024),
      make("gpt2-large", "Radford et al. 2019", 36, 1280, 20, 1024),
      make("gpt2-xl", "Radford et al. 2019", 48, 1600, 25, 1024),
      // GPT-3 (Brown et al. 2020, Table 2.1), context 2048. Where the paper's
      // heads x head size do not give d_model (XL: 24 x 128 vs 2048; 13B:
      // d_model 5140) we use Megatron's usual shapes: 16 heads, 5120.
      make("gpt3-small", "Brown et al. 2020", 12, 768, 12, 2048),
      make("gpt3-medium", "Brown et al. 2020", 24, 1024, 16, 2048),
      make("gpt3-large", "Brown et al. 2020", 24, 1536, 16, 2048),
      make("gpt3-xl", "Brown et al. 2020 (16 heads)", 24, 2048, 16, 2048),
      make("gpt3-2.7b", "Brown et al. 2020", 32, 2560, 32, 2048),
      make("gpt3-6.7b", "Brown et al. 2020", 32, 4096, 32, 2048),
      make("gpt3-13b", "Brown et al. 2020 (hidden 5120)", 40, 5120, 40, 2048),
      make("gpt3-175b", "Brown et al. 2020", 96, 12288, 96, 2048),
      // Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, Table 3; the
      // config.json of meta-llama/Meta-Llama-3-8B, -70B and
      // Llama-3.1-405B on Hugging Face): 8 kv heads, vocabulary 128256, rope
      // theta 500000, pre-training context 8192, RMSNorm eps 1e-5, untied
      // output layer, no biases. 8.03B, 70.6B and 405.9B parameters.
      with_batch(make_llama("llama-3-8b", "Meta 2024, Llama 3 8B config.json", 32, 4096, 32, 8,
                            14336, 8192, kLlama3Vocab, 500000.0f),
                 2048),
      with_batch(make_llama("llama-3-70b", "Meta 2024, Llama 3 70B config.json", 80, 8192, 64, 8,
                            28672, 8192, kLlama3Vocab, 500000.0f),
                 2048),
      with_batch(make_llama("llama-3-405b", "Meta 2024, Llama 3.1 405B config.json", 126, 16384,
                            128, 8, 53248, 8192, kLlama3Vocab, 500000.0f),
                 2048),
      // Long-context Llama 3 (issue 36): the same shapes at the lengths of
      // Llama 3's long-context pre-training (§3.4.2 grows the context from
      // 8K to 128K tokens) and Megatron's / NeMo's 32k recipes, planned with
      // context parallelism. The paper gives no batch for these stages: the
      // 8k phase's 16M tokens per step are kept (128 x 128k, 512 x 32k).
      with_batch(make_llama("llama-3-8b-128k", "Meta 2024, Llama 3 8B at 128k tokens", 32, 4096,
                            32, 8, 14336, 131072, kLlama3Vocab, 500000.0f),
                 128),
      with_batch(make_llama("llama-3-70b-32k", "Meta 2024, Llama 3 70B at 32k tokens", 80, 8192,
                            64, 8, 28672, 32768, kLlama3Vocab, 500000.0f),
                 512),
      // Mixture of experts (issue 35 item 7; config.json of each on Hugging
      // Face). Mixtral 8x7B: 46.7B parameters, 12.9B active; 8x22B: 141B,
      // 39B active. Planned at 4096 tokens (config.json allows 32768 /
      // 65536: --seq-length); no batch is published: 1024 sequences (4M
      // tokens) is this preset's assumption.
      with_batch(make_moe(make_llama("mixtral-8x7b", "Mistral AI 2024, Mixtral-8x7B config.json",
                                     32, 4096, 32, 8, 14336, 4096, 32000, 1e6f),
                          8, 2),
                 1024),
      with_batch(make_moe(make_llama("mixtral-8x22b", "Mistral AI 2024, Mixtral-8x22B config.json",
                                     56, 6144, 48, 8, 16384, 4096, 32768, 1e6f),
                          8, 2),
                 1024),
      // Qwen1.5-MoE-A2.7B: 60 routed experts of 1408 (top 4) and a shared
      // expert of 5632 behind a sigmoid gate (--moe-shared-expert-gate),
      // q / k / v biases and un-renormalised gates, as the engine runs it
      // and its config.json says (tests/ckpt/test_export_qwen2_moe.cpp
      // imports that file and compares). Parameters 14.3B.
      with_batch(qwen_moe(make_moe(make_llama("qwen1.5-moe-a2.7b",
                                              "Qwen 2024, Qwen1.5-MoE-A2.7B config.json", 24, 2048,
                                              16, 16, 1408, 4096, 151936, 1e6f),
                                   60, 4, 5632, true)),
                 1024),
      // DeepSeek-V2-Lite: 64 routed experts of 1408 (top 6) and 2 shared
      // ones, one shared expert of 2 x 1408 = 2816 without a gate (the
      // same FLOPs and parameters). Its attention is MLA (a 512-wide
      // compressed K/V, 192-wide query-key heads): it is planned as plain
      // multi-head attention of 16 heads of 128 (13.8M vs 16.8M attention
      // parameters a layer, query-key FLOPs 2/3 of MLA's), and its first
      // layer's dense MLP (10944) as an MoE layer like the others (about
      // 0.5B parameters too many of 15.7B). Approximate.
      with_batch(make_moe(make_llama("deepseek-v2-lite", "DeepSeek-AI 2024, DeepSeek-V2-Lite "
                                     "config.json (MLA as MHA; approximate)",
                                     27, 2048, 16, 16, 1408, 4096, 102400, 10000.0f),
                          64, 6, 2816),
                 1024),
      // configs/llama-tiny.toml's model, configs/default.toml's shape as a
      // Llama: 4 query heads over 2 kv heads, SwiGLU's default width (4 C 2/3
      // rounded down to 64: 640), rope base 10000, and the vocabulary the
      // run gets from the embedded corpus's tokenizer (4096).
      make_llama("llama-tiny", "configs/llama-tiny.toml", 4, 256, 4, 2, 0, 128,
                 kEmbeddedCorpusVocab, 10000.0f),
  };
  return presets;
}

namespace {

// A model file's keys: `tessera train`'s flag names (one vocabulary for
// both commands), each with where it goes in GPTConfig.
struct ModelKey {
  const char* train_name;  // num-layers (the flag --num-layers)
  const char* old_name;    // num_layers: the `[model]` table of older model files
  int64_t GPTConfig::*field;
  bool required;
};
constexpr ModelKey kModelKeys[] = {
    {flag_key(flag::num_layers), "num_layers", &GPTConfig::num_layers, true},
    {flag_key(flag::hidden_size), "hidden_size", &GPTConfig::hidden_size, true},
    {flag_key(flag::num_heads), "num_heads", &GPTConfig::num_heads, true},
    {flag_key(flag::seq_length), "seq_length", &GPTConfig::seq_length, true},
    {flag_key(flag::vocab_size), "vocab_size", &GPTConfig::vocab_size, false},
    {flag_key(flag::ffn_hidden_size), "ffn_hidden_size", &GPTConfig::ffn_hidden_size, false},
    {flag_key(flag::max_positions), "max_position_embeddings",
     &GPTConfig::max_position_embeddings, false},
    {flag_key(flag::vocab_divisor), "make_vocab_size_divisible_by",
     &GPTConfig::make_vocab_size_divisible_by, false},
    {flag_key(flag::num_experts), "num_experts", &GPTConfig::num_experts, false},
    {flag_key(flag::moe_layer_freq), "moe_layer_freq", &GPTConfig::moe_layer_freq, false},
    {flag_key(flag::moe_router_topk), "moe_router_topk", &GPTConfig::moe_router_topk, false},
    {flag_key(flag::moe_shared_size), "moe_shared_expert_intermediate_size",
     &GPTConfig::moe_shared_expert_intermediate_size, false},
};

// The Llama family's switches (Megatron-LM's flag names, as `tessera
// train` takes them): not integers, so each is read by its own kind.
constexpr const char* kFamilyKeys[] = {
    flag_key(flag::normalization),         flag_key(flag::norm_epsilon),
    flag_key(flag::swiglu),                flag_key(flag::position_embedding),
    flag_key(flag::rotary_base),           flag_key(flag::group_query_attention),
    flag_key(flag::num_query_groups),      flag_key(flag::untie_embeddings),
    flag_key(flag::disable_bias_linear)};

std::string model_key_list() {
  std::string all;
  for (const ModelKey& k : kModelKeys) all += (all.empty() ? "" : ", ") + std::string(k.train_name);
  for (const char* k : kFamilyKeys) all += ", " + std::string(k);
  return all + ", " + flag_key(flag::moe_capacity_factor) + ", " +
         flag_key(flag::moe_shared_gate);
}

bool is_family_key(const std::string& key) {
  for (const char* k : kFamilyKeys)
    if (key == k) return true;
  return false;
}

bool flag_value(const std::string& path, const std::string& key, const toml::node& v) {
  const auto b = v.value<bool>();
  TESSERA_CHECK(v.is_boolean() && b.has_value(), "{}: key '{}' must be true or false", path, key);
  return *b;
}

// A float key: TOML integers (rotary-base = 500000) are numbers too. Both
// float keys (norm-epsilon, rotary-base) must be positive and finite as a
// float (1e300 would turn into inf).
float number_value(const std::string& path, const std::string& key, const toml::node& v) {
  const auto d = v.value<double>();
  TESSERA_CHECK((v.is_floating_point() || v.is_integer()) && d.has_value(),
                "{}: key '{}' must be a number", path, key);
  TESSERA_CHECK(std::isfinite(float(*d)) && float(*d) > 0,
                "{}: key '{}' must be a finite number > 0 (got {})", path, key, *d);
  return float(*d);
}

std::string string_value(const std::string& path, const std::string& key, const toml::node& v) {
  const auto str = v.value<std::string>();
  TESSERA_CHECK(v.is_string() && str.has_value(), "{}: key '{}' must be a string", path, key);
  return *str;
}

// Sets one of kFamilyKeys in `c`. group-query-attention only records the
// switch (`gqa`): num-query-groups needs it, as Megatron-LM's does.
void set_family_key(GPTConfig& c, bool& gqa, const std::string& path, const std::string& key,
                    const toml::node& v) {
  if (key == flag_key(flag::normalization)) {
    const std::string n = string_value(path, key, v);
    TESSERA_CHECK(n == "LayerNorm" || n == "RMSNorm",
                  "{}: normalization must be \"LayerNorm\" or \"RMSNorm\" (got \"{}\")", path, clipped(n));
    c.normalization = n == "RMSNorm" ? Normalization::RMSNorm : Normalization::LayerNorm;
  } else if (key == flag_key(flag::norm_epsilon)) {
    c.norm_epsilon = number_value(path, key, v);
  } else if (key == flag_key(flag::swiglu)) {
    c.swiglu = flag_value(path, key, v);
  } else if (key == flag_key(flag::position_embedding)) {
    const std::string n = string_value(path, key, v);
    TESSERA_CHECK(n == "learned_absolute" || n == "rope",
                  "{}: position-embedding-type must be \"learned_absolute\" or \"rope\" (got \"{}\")",
                  path, clipped(n));
    c.position_embedding = n == "rope" ? PositionEmbedding::Rope : PositionEmbedding::Learned;
  } else if (key == flag_key(flag::rotary_base)) {
    c.rotary_base = number_value(path, key, v);
  } else if (key == flag_key(flag::group_query_attention)) {
    gqa = flag_value(path, key, v);
  } else if (key == flag_key(flag::num_query_groups)) {
    const auto n = v.value<int64_t>();
    TESSERA_CHECK(v.is_integer() && n.has_value(), "{}: key '{}' must be an integer", path, key);
    c.num_query_groups = *n;
  } else if (key == flag_key(flag::untie_embeddings)) {
    c.untie_embeddings = flag_value(path, key, v);
  } else if (key == flag_key(flag::disable_bias_linear)) {
    c.add_bias_linear = !flag_value(path, key, v);
  }
}

}  // namespace

GPTConfig load_model_file(const std::string& path, const KeyFilter& other_known_key) {
  toml::table root;
  try {
    const std::string text = read_toml_text(path, "model file");
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail("{}: TOML parse error at line {}: {}", path, e.source().begin.line, e.description());
  }
  return model_from_table(root, path, other_known_key);
}

GPTConfig model_from_table(const toml::table& root, const std::string& path,
                           const KeyFilter& other_known_key) {
  // Older model files hold snake_case keys in a [model] table; today's use
  // `tessera train`'s key names at the top level (a train --config file is
  // a model file too).
  const toml::table* old = root["model"].as_table();
  const bool legacy = old != nullptr;
  if (legacy)
    for (const auto& [k, v] : root)
      TESSERA_CHECK(k.str() == "model", "{}: unknown key '{}' (a model file with a [model] table "
                    "holds nothing else)", path, clipped(k.str()));
  const toml::table& t = legacy ? *old : root;
  GPTConfig c;
  c.vocab_size = kGpt2Vocab;
  c.make_vocab_size_divisible_by = 128;
  bool gqa = false;  // group-query-attention
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (!legacy && is_family_key(key)) {
      set_family_key(c, gqa, path, key, v);
      continue;
    }
    // Mixture of experts (plan/moe_cost.h): the capacity factor is the one
    // float that shapes the plan (the experts' rows); the losses' keys are
    // training settings (other_known_key).
    if (!legacy && key == flag_key(flag::moe_capacity_factor)) {
      c.moe_capacity_factor = number_value(path, key, v);
      continue;
    }
    if (!legacy && key == flag_key(flag::moe_shared_gate)) {  // the shared expert's gate
      c.moe_shared_expert_gate = flag_value(path, key, v);
      continue;
    }
    const ModelKey* mk = nullptr;
    for (const ModelKey& cand : kModelKeys)
      if (key == (legacy ? cand.old_name : cand.train_name)) mk = &cand;
    if (mk == nullptr) {
      // A key of `tessera train --config` that does not shape the model
      // (lr, train-iters) is not this file's error; anything else is.
      TESSERA_CHECK(!legacy && other_known_key && other_known_key(key),
                    "{}: unknown key '{}' (model keys: {})", path, clipped(key),
                    model_key_list());
      continue;
    }
    const auto value = v.value<int64_t>();
    TESSERA_CHECK(v.is_integer() && value.has_value(), "{}: key '{}' must be an integer", path,
                  key);
    c.*(mk->field) = *value;
  }
  for (const ModelKey& k : kModelKeys)
    TESSERA_CHECK(!k.required || t.contains(legacy ? k.old_name : k.train_name),
                  "{}: missing integer key '{}'", path, legacy ? k.old_name : k.train_name);
  // Megatron-LM ignores --num-query-groups without --group-query-attention;
  // a file that sets one without the other most likely meant both.
  TESSERA_CHECK(gqa == (c.num_query_groups > 0),
                "{}: group-query-attention = true and num-query-groups go together", path);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return c;
}

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& model_aliases() {
  // The sizes people type (`--model 175B`): the Frontier study's models,
  // which the README plans, and the other Megatron sizes.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"22b", "frontier-22b"}, {"175b", "frontier-175b"}, {"1t", "frontier-1t"},
      {"530b", "mt-530b"},     {"gpt3", "gpt3-175b"},     {"gpt2", "gpt2-small"},
      // Llama's sizes have no GPT namesake: "70B" today usually means Llama.
      {"8b", "llama-3-8b"},    {"70b", "llama-3-70b"},    {"405b", "llama-3-405b"},
      {"llama-3.1-405b", "llama-3-405b"},
  };
  return aliases;
}

const ModelPreset* find_preset(const std::string& name_or_alias) {
  // Names are case-insensitive: GPT3-175B, 175B.
  const std::string name = lower(name_or_alias);
  for (const auto& p : model_presets())
    if (p.name == name) return &p;
  for (const auto& [alias, preset] : model_aliases())
    if (alias == name) return find_preset(preset);
  return nullptr;
}

GPTConfig load_model(const std::string& name_or_path, const KeyFilter& other_known_key) {
  if (const ModelPreset* p = find_preset(name_or_path)) return p->config;
  const std::string name = lower(name_or_path);
  if (name_or_path.ends_with(".toml") || name_or_path.find('/') != std::string::npos) {
    TESSERA_CHECK(std::filesystem::exists(name_or_path), "--model: no such file '{}'",
                  name_or_path);
    return load_model_file(name_or_path, other_known_key);
  }
  std::vector<std::pair<size_t, std::string>> near;
  for (const auto& p : model_presets()) near.push_back({edit_distance(p.name, name), p.name});
  std::sort(near.begin(), near.end());
  fail("--model: unknown preset '{}' (did you mean '{}'? `tessera plan --list` lists them; or a "
       ".toml file)",
       name_or_path, near[0].second);
}

}  // namespace tessera::plan
