// Hugging Face Llama (LlamaForCausalLM) naming, both ways. Linear weights
// are (out, in) in both, so nothing is transposed; our fused tensors are
// split into row blocks:
//   ours                               theirs (LlamaForCausalLM state dict)
//   wte (Vp, C), real rows only        model.embed_tokens.weight (V, C)
//   h.N.ln_1.weight (C)                model.layers.N.input_layernorm.weight
//   h.N.attn.qkv.weight (qkv_width, C) model.layers.N.self_attn.q_proj.weight (NH hs, C)
//     rows [q | k | v]                   .k_proj.weight (KVH hs, C), .v_proj.weight (KVH hs, C)
//   h.N.attn.proj.weight (C, NH hs)    model.layers.N.self_attn.o_proj.weight
//   h.N.ln_2.weight (C)                model.layers.N.post_attention_layernorm.weight
//   h.N.mlp.fc.weight (2F, C)          model.layers.N.mlp.gate_proj.weight (F, C),
//     rows [gate | up]                   .up_proj.weight (F, C)
//   h.N.mlp.proj.weight (C, F)         model.layers.N.mlp.down_proj.weight
//   ln_f.weight (C)                    model.norm.weight
//   lm_head.weight (Vp, C), untied     lm_head.weight (V, C), real rows only
// Biases (add_bias_linear: HF's attention_bias and mlp_bias together) split
// like their weights (q_proj.bias, ..., down_proj.bias). The rotary
// convention is HF's rotate_half one (llama_common.md), so q and k rows need
// no permutation. A tied model writes no lm_head and says
// tie_word_embeddings true.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/model/gpt.h"

namespace tessera::ckpt {

// One Hugging Face tensor holding rows [row0, row0 + rows) of one of ours
// (elements, for a bias).
struct HfPiece {
  std::string name;
  int64_t row0 = 0, rows = 0;
};

// "h.N.rest" -> N and rest; false for names outside the layers.
bool split_layer(const std::string& ours, std::string* layer, std::string* rest);

// The Hugging Face tensors that hold our parameter `ours` of model m, in row
// order (wte and lm_head: the real vocabulary rows only).
std::vector<HfPiece> llama_hf_pieces(const std::string& ours, const GPTConfig& m);

// LlamaConfig of a model; bos_token_id = eos_token_id = eot_id when >= 0.
nlohmann::json llama_hf_config(const GPTConfig& m, int32_t eot_id = -1);
// The model a LlamaConfig describes. Refuses, naming the key, what this
// engine does not compute (rope_scaling, another hidden_act, a head_dim that
// is not hidden_size / num_attention_heads, attention_bias != mlp_bias, ...).
GPTConfig model_from_llama_hf_config(const nlohmann::json& cfg);

// out_dir/model.safetensors (or its shards and index past max_shard_bytes,
// hf_shards.h) + out_dir/config.json of a whole Llama-shaped model (tp = 1;
// RMSNorm, SwiGLU, rope).
void export_hf_llama(const GPT& model, const std::string& out_dir, int32_t eot_id = -1,
                     uint64_t max_shard_bytes = 0);

// Fill a whole Llama-shaped model (tp = 1) from Llama weights: a safetensors
// file, a model.safetensors.index.json and its shards, or a directory
// holding either (hf_tensors.h). Names with or without the "model." prefix;
// F32, F16 or BF16. Padding
// rows stay zero. Refuses tensors the model has no place for (layers it has
// not; an lm_head.weight of a tied model that differs from embed_tokens);
// older files' rotary buffers (self_attn.rotary_emb.inv_freq) are skipped.
void import_hf_llama(const std::string& weights, GPT& model);

// The Llama family's writer and reader with another naming of the same
// blocks (Mixtral's experts: hf_mixtral.h). `pieces` names each parameter's
// row blocks; a 3-D parameter (experts stacked on a leading dim) is rows of
// its last dim, E x rows in all. `family` names the files in messages.
using HfPiecesOf = std::vector<HfPiece> (*)(const std::string& ours, const GPTConfig& m);
void export_llama_family(const GPT& model, const std::string& out_dir, HfPiecesOf pieces,
                         const nlohmann::json& config, uint64_t max_shard_bytes,
                         const char* family);
void import_llama_family(const std::string& weights, GPT& model, HfPiecesOf pieces,
                         const char* family);

}  // namespace tessera::ckpt
