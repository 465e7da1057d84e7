// GPTConfig: every size of a GPT-2-style or Llama-style decoder. Validated
// in one place. The Llama family is GPT with Megatron-LM's switches:
// --normalization RMSNorm, --swiglu, --position-embedding-type rope,
// --group-query-attention --num-query-groups G,
// --untie-embeddings-and-output-weights, --disable-bias-linear.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace tessera {

enum class Normalization { LayerNorm, RMSNorm };
enum class PositionEmbedding { Learned, Rope };
// --moe-router-load-balancing-type: the Switch/GShard auxiliary loss over
// the micro-batch, the same per sequence averaged over its sequences
// (Megatron's seq_aux_loss), or none.
enum class MoeLoadBalancing { AuxLoss, SeqAuxLoss, None };

struct GPTConfig {
  int64_t num_layers = 6;
  int64_t hidden_size = 384;
  int64_t num_heads = 6;
  int64_t seq_length = 256;          // training context (tokens per sequence)
  int64_t max_position_embeddings = 0;  // rows of the position table (0: seq_length)
  int64_t vocab_size = 256;          // real vocabulary (tokens the data can contain)
  int64_t ffn_hidden_size = 0;       // 0: 4 * hidden_size
  int64_t make_vocab_size_divisible_by = 128;  // Megatron's padding, times tp
  float init_std = 0.02f;
  // Dropout probabilities (Megatron's --attention-dropout, --hidden-dropout).
  // The library default is 0 (the fp32 reference path); `tessera train`'s
  // flags default to Megatron's 0.1. Attention: the softmax probabilities;
  // hidden: the embedding output and each block's attention and MLP output
  // before its residual add. Masks: kernels/cpu/dropout.h.
  float attention_dropout = 0.0f;
  float hidden_dropout = 0.0f;

  // ---- the Llama family's switches (defaults: GPT-2) ----
  Normalization normalization = Normalization::LayerNorm;  // --normalization
  float norm_epsilon = 1e-5f;                               // --norm-epsilon
  // --swiglu: the MLP's first GEMM writes gate and up (2 F columns), and
  // silu(gate) * up feeds the second; ffn() defaults to Megatron's
  // 4 C * 2 / 3 rounded down to a multiple of 64 so the FLOPs match GPT's.
  bool swiglu = false;
  // --position-embedding-type: learned absolute table, or rotary on q and k
  // (no position table) with --rotary-base.
  PositionEmbedding position_embedding = PositionEmbedding::Learned;
  float rotary_base = 10000.0f;
  // --num-query-groups (with --group-query-attention): key/value heads, each
  // shared by num_heads / G query heads. 0: one per query head (plain MHA).
  int64_t num_query_groups = 0;
  bool untie_embeddings = false;  // --untie-embeddings-and-output-weights: own lm_head
  bool add_bias_linear = true;    // false under --disable-bias-linear: no GEMM biases
  // --add-qkv-bias: the qkv GEMM keeps its bias under --disable-bias-linear
  // (Megatron-LM's flag; Qwen2's attention: biased q, k, v, no other bias).
  bool add_qkv_bias = false;

  // ---- mixture of experts (Megatron-LM's flags; docs/moe.md) ----
  // --num-experts E: the MLP of every --moe-layer-freq-th layer (l % freq
  // == 0, Megatron's integer form) becomes E experts of the same width
  // (GELU or SwiGLU) behind a router; 0: every MLP dense.
  int64_t num_experts = 0;
  int64_t moe_layer_freq = 1;
  int64_t moe_router_topk = 2;          // --moe-router-topk: experts per token
  // --moe-router-pre-softmax (Megatron-LM's flag): the gates are the top-k
  // of the softmax over all E logits, not renormalised (Qwen2-MoE's
  // norm_topk_prob false). Off: the softmax over the top-k logits (the
  // same top-k renormalised to sum to 1; Mixtral's).
  bool moe_router_pre_softmax = false;
  float moe_aux_loss_coeff = 0.0f;      // --moe-aux-loss-coeff (Switch/GShard)
  float moe_z_loss_coeff = 0.0f;        // --moe-z-loss-coeff (ST-MoE router z-loss)
  MoeLoadBalancing moe_load_balancing = MoeLoadBalancing::AuxLoss;
  // --moe-expert-capacity-factor: each expert takes at most
  // ceil(tokens * topk / E * factor) of a micro-batch's token choices, the
  // first in (b, t) order; the rest are dropped. kDropless (unset): no limit.
  static constexpr float kDropless = -1.0f;
  float moe_capacity_factor = kDropless;
  // --moe-shared-expert-intermediate-size S (Megatron-LM; Qwen-MoE,
  // DeepSeek): every MoE layer also runs one dense MLP of width S (GELU,
  // or SwiGLU in the Llama family) on every token and adds its output to
  // the routed experts' combined output; 0: none. --moe-shared-expert-gate
  // (Megatron-LM's flag; Qwen2-MoE): that output is first scaled per token
  // by sigmoid(x . w_gate), w_gate (C).
  int64_t moe_shared_expert_intermediate_size = 0;
  bool moe_shared_expert_gate = false;

  int64_t head_size() const { return hidden_size / num_heads; }
  int64_t positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int64_t ffn() const {
    if (ffn_hidden_size > 0) return ffn_hidden_size;
    return swiglu ? std::max<int64_t>(4 * hidden_size * 2 / 3 / 64 * 64, 64) : 4 * hidden_size;
  }
  // Key/value heads: num_query_groups under GQA, else one per query head.
  int64_t kv_heads() const { return num_query_groups > 0 ? num_query_groups : num_heads; }
  // Columns of the fused qkv GEMM: NH query heads and 2 KVH key/value heads.
  int64_t qkv_width() const { return (num_heads + 2 * kv_heads()) * head_size(); }
  // Columns of the MLP's first GEMM: F, or gate and up (2 F) under SwiGLU.
  int64_t fc_width() const { return swiglu ? 2 * ffn() : ffn(); }
  bool rope() const { return position_embedding == PositionEmbedding::Rope; }
  bool rmsnorm() const { return normalization == Normalization::RMSNorm; }
  bool moe() const { return num_experts > 0; }
  // Global layer l has experts instead of a dense MLP (the one rule: the
  // parameters, the activations' views and the planner all ask it).
  bool moe_layer(int64_t l) const { return moe() && is_moe_layer(l, moe_layer_freq); }
  static bool is_moe_layer(int64_t l, int64_t freq) { return l % freq == 0; }
  // A shared expert (--moe-shared-expert-intermediate-size) in every MoE layer.
  bool moe_shared() const { return moe() && moe_shared_expert_intermediate_size > 0; }
  int64_t moe_shared_fc_width() const {
    return swiglu ? 2 * moe_shared_expert_intermediate_size : moe_shared_expert_intermediate_size;
  }
  bool moe_dropless() const { return moe_capacity_factor == kDropless; }
  // The aux loss's coefficient (0 under load balancing none).
  float moe_aux_coeff() const {
    return moe_load_balancing == MoeLoadBalancing::None ? 0.0f : moe_aux_loss_coeff;
  }
  // Each expert's capacity for a micro-batch of `tokens` tokens (Megatron's
  // get_capacity); tokens * topk (no limit) when dropless.
  int64_t moe_capacity(int64_t tokens) const;
  bool qkv_bias() const { return add_bias_linear || add_qkv_bias; }  // the qkv GEMM has a bias
  // Anything beyond GPT-2's architecture (exports and tools that speak only
  // GPT-2 refuse such a model by this).
  bool llama_family() const {
    return rmsnorm() || swiglu || rope() || num_query_groups > 0 || untie_embeddings ||
           !add_bias_linear;
  }
  // The embedding table's row count: vocab rounded up to a multiple of
  // make_vocab_size_divisible_by * tp, so every tp rank gets an equal slice.
  int64_t padded_vocab(int64_t tp = 1) const {
    int64_t m = make_vocab_size_divisible_by * tp;
    return (vocab_size + m - 1) / m * m;
  }

  // Throws tessera::Error naming the flag of the first value out of range.
  void validate() const;
  std::string summary() const;
};

}  // namespace tessera
