// Model presets (the Frontier study's, Korthikanti et al.'s, GPT-2, GPT-3 and
// Llama 3) and model files (TOML). Each is a GPTConfig: parameter counts, FLOPs and
// memory all come from the engine's code for that config.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "tessera/config/gpt_config.h"

namespace tessera::plan {

struct ModelPreset {
  std::string name;
  std::string source;  // where the shape comes from
  GPTConfig config;
  // Sequences per optimizer step the source trained with (`plan --model`'s
  // --global-batch-size when none is given); 0: the source gives none.
  int64_t global_batch = 0;
};

const std::vector<ModelPreset>& model_presets();
// Short names people type, each with its preset: {"175b", "frontier-175b"}.
const std::vector<std::pair<std::string, std::string>>& model_aliases();

// Keys of a model file that are not the model's shape but are still valid
// (the CLI passes `tessera train`'s flag names, so a train --config file is
// a model file); empty: none.
using KeyFilter = std::function<bool(const std::string& key)>;

// The preset a name or alias names (any case), or null.
const ModelPreset* find_preset(const std::string& name);

// A preset name ("frontier-175b", any case, or an alias: "175B") or a path
// to a TOML model file. Unknown names are an error naming the closest preset.
GPTConfig load_model(const std::string& name_or_path, const KeyFilter& other_known_key = {});
// A model file: `tessera train`'s key names at the top level (num-layers,
// hidden-size, num-attention-heads, seq-length; vocab-size (default GPT-2's
// 50257), ffn-hidden-size, max-position-embeddings,
// make-vocab-size-divisible-by; the Llama family's normalization
// ("LayerNorm" | "RMSNorm"), norm-epsilon, swiglu, position-embedding-type
// ("learned_absolute" | "rope"), rotary-base, group-query-attention with
// num-query-groups, untie-embeddings-and-output-weights,
// disable-bias-linear), or older files' snake_case keys in a [model] table. Any other key is an error naming the file and the key,
// unless other_known_key accepts it.
GPTConfig load_model_file(const std::string& path, const KeyFilter& other_known_key = {});
// The same keys read from a table already parsed (a published run's
// [run.model], bench/published/); `path` names it in errors.
GPTConfig model_from_table(const toml::table& table, const std::string& path,
                           const KeyFilter& other_known_key = {});

}  // namespace tessera::plan
