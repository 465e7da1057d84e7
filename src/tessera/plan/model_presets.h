// Model presets (the Frontier study's, Korthikanti et al.'s, GPT-2 and GPT-3)
// and model files (TOML). Each is a GPTConfig: parameter counts, FLOPs and
// memory all come from the engine's code for that config.
#pragma once
#include <string>
#include <vector>

#include "tessera/config/gpt_config.h"

namespace tessera::plan {

struct ModelPreset {
  std::string name;
  std::string source;  // where the shape comes from
  GPTConfig config;
};

const std::vector<ModelPreset>& model_presets();
// A preset name ("frontier-175b") or a path to a TOML model file.
// Unknown names are an error listing the closest preset names.
GPTConfig load_model(const std::string& name_or_path);
GPTConfig load_model_file(const std::string& path);

}  // namespace tessera::plan
