// Text generation on one rank: an inference forward that appends positions
// to a KV cache (each new token costs one position), and the sampling loop
// around it. The no-cache path recomputes the whole window with
// GPT::forward, the training math, so tests can hold the cache to it.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/generate_sample.h"
#include "tessera/model/gpt.h"
#include "tessera/model/kv_cache.h"

namespace tessera {

// Incremental inference for one sequence. The model must be whole on this
// rank (tp = 1, one pipeline stage) and outlive the decoder. Every
// architecture the engine trains: LayerNorm or RMSNorm, GELU or SwiGLU,
// learned positions or RoPE, multi-head or grouped-query attention, with or
// without linear biases, tied or untied LM head, dense or MoE MLPs (every
// token to its top-k experts: no capacity drops at generation).
class Decoder {
 public:
  explicit Decoder(const GPT& model);

  void reset() { cache_.reset(); }
  int64_t length() const { return cache_.len; }
  int64_t capacity() const { return cache_.max_T; }  // positions(): the context the model knows

  // Runs tokens (n) at positions length() .. length()+n-1, appending their
  // keys and values; returns the logits (V) after the last one. Valid until
  // the next call. length() + n must not exceed capacity().
  const float* forward(const int32_t* tokens, int64_t n);

 private:
  void resize(int64_t n);
  // out (rows, C) = the model's norm (LayerNorm or RMSNorm) of x (rows, C).
  void norm(const kernels::Ops& ops, float* out, const float* x, const float* w, const float* b,
            int64_t rows);
  // tmp_ (n, C) = an MoE layer's experts on ln_ (n, C).
  void moe_mlp(const kernels::Ops& ops, const LayerWeights& lw, int64_t n);

  const GPT& model_;
  int64_t C_, F_, Ff_, V_;  // Ff_: the fc GEMM's width, F or 2 F ([gate | up]) under SwiGLU
  AttentionHeads heads_;    // NH query heads over KVH key/value heads of hs, rope base (0: none)
  int64_t Cq_, KVW_, QKV_;  // NH * hs, KVH * hs, (NH + 2 KVH) * hs
  KVCache cache_;           // KVW_ per position; keys stored rotated under RoPE
  // Scratch for n tokens.
  std::vector<float> x_;       // (n, C) residual stream
  std::vector<float> ln_;      // (n, C)
  std::vector<float> mean_;    // (n) LayerNorm only
  std::vector<float> rstd_;    // (n)
  std::vector<float> qkv_;     // (n, QKV) rows [q: NH | k: KVH | v: KVH] heads, unrotated
  std::vector<float> atty_;    // (n, Cq)
  std::vector<float> tmp_;     // (n, C) branch output before the residual add
  std::vector<float> fch_;     // (n, Ff)
  std::vector<float> act_;     // (n, F) GELU(fch) or silu(gate) * up
  std::vector<float> logits_;  // (V)
  // MoE layers (E experts, top K), n K routed rows.
  std::vector<float> moe_logits_;     // (n, E) router logits
  std::vector<int32_t> moe_idx_;      // (n, K) chosen experts
  std::vector<float> moe_gates_;      // (n, K)
  std::vector<int32_t> moe_slot_;     // (n, K) row in the sorted rows
  std::vector<int32_t> moe_counts_;   // (E)
  std::vector<float> moe_stats_;      // (kMoeStats + E)
  std::vector<float> moe_xs_;         // (n K, C) ln_ rows sorted by expert
  std::vector<float> moe_h_;          // (n K, Ff)
  std::vector<float> moe_act_;        // (n K, F)
  std::vector<float> moe_ys_;         // (n K, C)
  // The shared expert (GPTConfig::moe_shared; model/moe_shared_expert.h).
  std::vector<float> moe_sh_h_;       // (n, Sf)
  std::vector<float> moe_sh_act_;     // (n, S)
  std::vector<float> moe_sh_y_;       // (n, C)
  std::vector<float> moe_sh_gate_;    // (n)
};

// Logits (V) after the last of tokens (n), by GPT::forward over all n.
std::vector<float> logits_no_cache(GPT& model, const int32_t* tokens, int64_t n);

struct GenerateConfig {
  int64_t max_new_tokens = 64;
  SamplingConfig sampling;
  uint64_t seed = 0;        // the sampling Rng's seed
  int32_t stop_token = -1;  // stop after producing it (e.g. <|endoftext|>); -1: never
  bool use_kv_cache = true;
};

// Continues prompt (non-empty) with up to max_new_tokens tokens and returns
// them. on_token (optional) sees each token as it is chosen; returning false
// stops. Past seq_length tokens the window slides: the newest half of it is
// kept and re-run (the same rule with and without the cache).
std::vector<int32_t> generate(GPT& model, std::span<const int32_t> prompt,
                              const GenerateConfig& cfg,
                              const std::function<bool(int32_t)>& on_token = {});

}  // namespace tessera
