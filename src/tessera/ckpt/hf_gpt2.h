// Hugging Face GPT-2 naming and orientation, both ways:
//   ours                          theirs (GPT2LMHeadModel state dict)
//   wte (Vp, C), real rows only   transformer.wte.weight (V, C)
//   wpe                           transformer.wpe.weight
//   h.N.ln_1/ln_2, ln_f           transformer.h.N.ln_1 / ln_2, transformer.ln_f
//   h.N.attn.qkv.weight (3C, C)   transformer.h.N.attn.c_attn.weight (C, 3C)   Conv1D: (in, out)
//   h.N.attn.proj.weight (C, C)   transformer.h.N.attn.c_proj.weight (C, C)    transposed
//   h.N.mlp.fc.weight (F, C)      transformer.h.N.mlp.c_fc.weight (C, F)
//   h.N.mlp.proj.weight (C, F)    transformer.h.N.mlp.c_proj.weight (F, C)
// Biases keep their shape. lm_head.weight is tied to wte and not written; on
// import it is accepted only when it equals wte (a tied head saved twice).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/model/gpt.h"

namespace tessera::ckpt {

// Hugging Face name of one of our parameters; *transpose: Conv1D weights.
std::string hf_name(const std::string& ours, bool* transpose);

// GPT2Config of a model (n_layer, n_embd, n_head, n_positions, ...);
// bos_token_id = eos_token_id = eot_id (the tokenizer's <|endoftext|>) when >= 0.
nlohmann::json hf_config(const GPTConfig& m, int32_t eot_id = -1);
// The model a GPT2Config describes. Refuses settings this engine does not
// compute (another activation, LayerNorm epsilon).
GPTConfig model_from_hf_config(const nlohmann::json& cfg);

// out_dir/model.safetensors (or its shards and index past max_shard_bytes,
// hf_shards.h) + out_dir/config.json of a whole model (tp = 1); eot_id as in
// hf_config.
void export_hf_gpt2(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
                    uint64_t max_shard_bytes = 0);

// Fill a whole model (tp = 1) from GPT-2 weights: a safetensors file, a
// model.safetensors.index.json and its shards, or a directory holding
// either (hf_tensors.h). Names with or without the "transformer." prefix;
// F32, F16 or BF16. Padding rows stay zero.
// Refuses, naming them, tensors the model has no place for (layers it does
// not have, an lm_head.weight that differs from wte); the causal-mask
// buffers of older files (h.N.attn.bias, h.N.attn.masked_bias) are skipped.
void import_hf_gpt2(const std::string& weights, GPT& model);

}  // namespace tessera::ckpt
