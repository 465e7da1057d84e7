#include "tessera/plan/model_presets.h"

#include <algorithm>
#include <filesystem>
#include <toml++/toml.h>

#include "tessera/core/edit_distance.h"
#include "tessera/core/error.h"

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
  };
  return presets;
}

GPTConfig load_model_file(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    fail("{}: TOML parse error at line {}: {}", path, e.source().begin.line, e.description());
  }
  const toml::table* t = root["model"].as_table();
  if (t == nullptr) t = &root;  // fields may sit at the top level too
  auto need = [&](const char* key) {
    auto v = (*t)[key].value<int64_t>();
    TESSERA_CHECK(v.has_value(), "{}: missing integer field 'model.{}'", path, key);
    return *v;
  };
  GPTConfig c;
  c.num_layers = need("num_layers");
  c.hidden_size = need("hidden_size");
  c.num_heads = need("num_heads");
  c.seq_length = need("seq_length");
  c.vocab_size = (*t)["vocab_size"].value<int64_t>().value_or(kGpt2Vocab);
  c.ffn_hidden_size = (*t)["ffn_hidden_size"].value<int64_t>().value_or(0);
  c.make_vocab_size_divisible_by =
      (*t)["make_vocab_size_divisible_by"].value<int64_t>().value_or(128);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return c;
}

GPTConfig load_model(const std::string& name_or_path) {
  for (const auto& p : model_presets())
    if (p.name == name_or_path) return p.config;
  if (name_or_path.ends_with(".toml") || name_or_path.find('/') != std::string::npos) {
    TESSERA_CHECK(std::filesystem::exists(name_or_path), "--model: no such file '{}'",
                  name_or_path);
    return load_model_file(name_or_path);
  }
  std::vector<std::pair<size_t, std::string>> near;
  for (const auto& p : model_presets()) near.push_back({edit_distance(p.name, name_or_path), p.name});
  std::sort(near.begin(), near.end());
  std::string all;
  for (const auto& p : model_presets()) all += (all.empty() ? "" : ", ") + p.name;
  fail("--model: unknown preset '{}' (did you mean '{}'? presets: {}; or a .toml file)",
       name_or_path, near[0].second, all);
}

}  // namespace tessera::plan
