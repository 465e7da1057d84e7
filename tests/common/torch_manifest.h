// What the PyTorch reference scripts (tests/model/torch_reference*.py) read
// to rebuild the engine's GPT: the shapes and optimizer settings, each
// parameter's name, shape and offset in the flat buffer, and the tokens.
#pragma once
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/model/gpt.h"
#include "tessera/train/train_config.h"

namespace tessera::test {

inline nlohmann::json torch_manifest(const TrainConfig& cfg, const GPT& model,
                                     const std::vector<int32_t>& tokens) {
  nlohmann::json m;
  m["config"] = {{"num_layers", cfg.model.num_layers},
                 {"hidden_size", cfg.model.hidden_size},
                 {"num_heads", cfg.model.num_heads},
                 {"seq_length", cfg.model.seq_length},
                 {"vocab_size", cfg.model.vocab_size},
                 {"padded_vocab", model.layout().padded_vocab()},
                 {"micro_batch", cfg.par.micro_batch},
                 {"global_batch", cfg.par.global_batch},
                 {"beta1", cfg.optim.beta1},
                 {"beta2", cfg.optim.beta2},
                 {"eps", cfg.optim.eps},
                 {"weight_decay", cfg.optim.weight_decay},
                 {"clip_grad", cfg.optim.clip_grad},
                 // The family's switches (torch_reference.py reads each one).
                 {"rmsnorm", cfg.model.rmsnorm()},
                 {"norm_epsilon", cfg.model.norm_epsilon},
                 {"swiglu", cfg.model.swiglu},
                 {"rope", cfg.model.rope()},
                 {"rotary_base", cfg.model.rotary_base},
                 {"kv_heads", cfg.model.kv_heads()},
                 {"untie_embeddings", cfg.model.untie_embeddings},
                 {"add_bias_linear", cfg.model.add_bias_linear},
                 {"add_qkv_bias", cfg.model.add_qkv_bias}};
  for (const ParamEntry& e : model.layout().entries()) {
    std::vector<int64_t> shape(e.global_shape.dims.begin(),
                               e.global_shape.dims.begin() + e.global_shape.ndim);
    m["params"].push_back(
        {{"name", e.name}, {"shape", shape}, {"offset", e.offset}, {"decay", e.weight_decay}});
  }
  m["tokens"] = tokens;
  return m;
}

}  // namespace tessera::test
