#include "tessera/config/model_fields.h"

#include <array>
#include <limits>

namespace tessera {

namespace {

using G = GPTConfig;

// A planned run writes a size or switch only where it differs from the
// default, so a GPT-2 model's command names none of the Llama switches.
template <auto M>
bool not_default(const G& m) {
  return m.*M != G{}.*M;
}
bool rope(const G& m) { return m.rope(); }

constexpr unsigned kShape = kSurfaceLayout | kSurfaceCheckpoint | kSurfaceShape;
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr FieldRange kPositive{1, kNoMax, ">= 1"};
// The model's tensors list every layer (ParamLayout), so a billion layers
// would exhaust memory describing them before any check of the bytes; the
// largest published models have a few hundred.
constexpr FieldRange kLayers{1, int64_t(1) << 16, "in [1, 65536]"};

constexpr std::array<const char*, 2> kNorms{"LayerNorm", "RMSNorm"};
constexpr std::array<const char*, 2> kPositions{"learned_absolute", "rope"};
// In MoeLoadBalancing's order.
constexpr std::array<const char*, 3> kBalancing{"aux_loss", "seq_aux_loss", "none"};

// The MoE fields other than --num-experts are stored and written only for
// an MoE model, so a dense model's files and commands name none of them.
bool moe(const G& m) { return m.moe(); }
template <auto M>
bool moe_not_default(const G& m) {
  return m.moe() && m.*M != G{}.*M;
}
constexpr unsigned kMoeTraining = kSurfaceLayout | kSurfaceCheckpoint;

const std::array<Field<G>, 31> kFields{{
    {.flag = flag::num_layers, .json_key = "num_layers", .surfaces = kShape,
     .access = &G::num_layers, .help = "transformer layers", .range = kLayers, .required = true},
    {.flag = flag::hidden_size, .json_key = "hidden_size", .surfaces = kShape,
     .access = &G::hidden_size, .help = "hidden size", .range = kPositive, .required = true},
    {.flag = flag::num_heads, .json_key = "num_heads", .surfaces = kShape,
     .access = &G::num_heads, .help = "attention heads", .range = kPositive, .required = true},
    // Files hold the width itself, the default spelled out
    // (model_from_json reads it back as the default).
    {.flag = flag::ffn_hidden_size, .json_key = "ffn_hidden_size", .surfaces = kShape,
     .access = &G::ffn_hidden_size, .help = "MLP width (0: 4 x hidden)",
     .range = FieldRange{0, kNoMax, ">= 0"},
     .written = not_default<&G::ffn_hidden_size>,
     .stored_value = [](const G& m) { return m.ffn(); }},
    {.flag = flag::seq_length, .json_key = "seq_length", .surfaces = kShape,
     .access = &G::seq_length, .help = "tokens per sequence", .range = kPositive,
     .required = true},
    {.flag = flag::vocab_size, .json_key = "vocab_size", .surfaces = kShape | kOptionElsewhere,
     .access = &G::vocab_size,
     .help = "model vocabulary (default: the tokenizer's, or the data file's)",
     .required = true},
    {.flag = flag::max_positions, .json_key = "max_position_embeddings", .surfaces = kShape,
     .access = &G::max_position_embeddings, .help = "rows of the position table (0: --seq-length)",
     .written = not_default<&G::max_position_embeddings>,
     .stored_value = [](const G& m) { return m.positions(); }},
    {.flag = flag::vocab_divisor, .json_key = "make_vocab_size_divisible_by", .surfaces = kShape,
     .access = &G::make_vocab_size_divisible_by,
     .help = "pad the embedding table to a multiple of this (x tensor-parallel size)",
     .range = kPositive,
     .written = not_default<&G::make_vocab_size_divisible_by>},
    {.flag = flag::init_std, .json_key = "init_std", .surfaces = kSurfaceCheckpoint,
     .access = &G::init_std, .help = "std of the normal weight initialisation"},
    {.flag = flag::attention_dropout, .json_key = "attention_dropout",
     .surfaces = kSurfaceCheckpoint, .access = &G::attention_dropout,
     .help = "dropout probability of the attention softmax, in [0, 1)"},
    {.flag = flag::hidden_dropout, .json_key = "hidden_dropout", .surfaces = kSurfaceCheckpoint,
     .access = &G::hidden_dropout,
     .help = "dropout probability of the embedding output and of each block's attention and MLP "
             "output, in [0, 1)"},
    // ---- the Llama family's switches: stored and written only where they
    // differ from GPT-2 ----
    {.flag = flag::normalization, .json_key = "normalization", .surfaces = kShape,
     .access = ChoiceAccess<G>{[](const G& m) { return kNorms[m.rmsnorm()]; },
                               [](G& m, std::string_view v) {
                                 m.normalization = v == kNorms[1] ? Normalization::RMSNorm
                                                                  : Normalization::LayerNorm;
                               },
                               kNorms},
     .help = "LayerNorm or RMSNorm (no bias, no mean)",
     .written = not_default<&G::normalization>, .stored = not_default<&G::normalization>},
    {.flag = flag::norm_epsilon, .json_key = "norm_epsilon", .surfaces = kShape,
     .access = &G::norm_epsilon, .help = "epsilon of the normalization",
     .written = not_default<&G::norm_epsilon>, .stored = not_default<&G::norm_epsilon>},
    {.flag = flag::swiglu, .json_key = "swiglu", .surfaces = kShape, .access = &G::swiglu,
     .help = "SwiGLU MLP: silu(gate) * up; --ffn-hidden-size defaults to 8/3 x hidden rounded "
             "down to a multiple of 64",
     .written = not_default<&G::swiglu>, .stored = not_default<&G::swiglu>},
    {.flag = flag::position_embedding, .json_key = "position_embedding_type", .surfaces = kShape,
     .access = ChoiceAccess<G>{[](const G& m) { return kPositions[m.rope()]; },
                               [](G& m, std::string_view v) {
                                 m.position_embedding = v == kPositions[1]
                                                            ? PositionEmbedding::Rope
                                                            : PositionEmbedding::Learned;
                               },
                               kPositions},
     .help = "learned_absolute (a position table) or rope (rotary, applied to q and k)",
     .written = rope, .stored = rope},
    // Under rope always, at its default too: the angles are part of the model.
    {.flag = flag::rotary_base, .json_key = "rotary_base", .surfaces = kShape,
     .access = &G::rotary_base, .help = "base of the rotary angles", .written = rope,
     .stored = rope},
    // Megatron's switch for num-query-groups, which holds the groups; the
    // two are checked together where the flags are read (cmd_train.cpp).
    {.flag = flag::group_query_attention, .json_key = nullptr, .surfaces = kSurfaceLayout,
     .access = DerivedSwitch<G>{[](const G& m) { return m.num_query_groups > 0; }},
     .help = "grouped-query attention: --num-query-groups key/value heads, each shared by "
             "num-attention-heads / num-query-groups query heads",
     .written = not_default<&G::num_query_groups>},
    {.flag = flag::num_query_groups, .json_key = "num_query_groups", .surfaces = kShape,
     .access = &G::num_query_groups, .help = "key/value heads under --group-query-attention",
     // 0 is "not given"; a count given is >= 1.
     .range = FieldRange{0, kNoMax, ">= 1"},
     .written = not_default<&G::num_query_groups>, .stored = not_default<&G::num_query_groups>,
     .hide_default = true},
    {.flag = flag::untie_embeddings, .json_key = "untie_embeddings_and_output_weights",
     .surfaces = kShape, .access = &G::untie_embeddings,
     .help = "an output layer (lm_head) of its own instead of the token embedding",
     .written = not_default<&G::untie_embeddings>, .stored = not_default<&G::untie_embeddings>},
    {.flag = flag::disable_bias_linear, .json_key = "add_bias_linear", .surfaces = kShape,
     .access = &G::add_bias_linear,
     .help = "no biases in the linear layers (qkv, projections, MLP)",
     .written = not_default<&G::add_bias_linear>, .stored = not_default<&G::add_bias_linear>,
     .negated = true},
    {.flag = flag::add_qkv_bias, .json_key = "add_qkv_bias", .surfaces = kShape,
     .access = &G::add_qkv_bias,
     .help = "keep the qkv layer's bias under --disable-bias-linear (Qwen2's attention)",
     .written = not_default<&G::add_qkv_bias>, .stored = not_default<&G::add_qkv_bias>},
    // ---- mixture of experts (docs/moe.md) ----
    {.flag = flag::num_experts, .json_key = "num_experts", .surfaces = kShape,
     .access = &G::num_experts,
     .help = "experts in each MoE layer's MLP (0: dense MLPs); tokens pick --moe-router-topk "
             "of them",
     // 0 is "not given" (dense); a count given is >= 1.
     .range = FieldRange{0, int64_t(1) << 16, ">= 1"},
     .written = moe, .stored = moe, .hide_default = true},
    {.flag = flag::moe_layer_freq, .json_key = "moe_layer_freq", .surfaces = kShape,
     .access = &G::moe_layer_freq,
     .help = "every k-th layer (l % k == 0) is an MoE layer, the others dense",
     .range = kLayers, .written = moe_not_default<&G::moe_layer_freq>, .stored = moe},
    {.flag = flag::moe_router_topk, .json_key = "moe_router_topk", .surfaces = kShape,
     .access = &G::moe_router_topk,
     .help = "experts each token is routed to (the largest router logits)",
     .range = FieldRange{1, int64_t(1) << 16, ">= 1"}, .written = moe, .stored = moe},
    // Changes what the gates are, so stored, and --load compares it.
    {.flag = flag::moe_router_pre_softmax, .json_key = "moe_router_pre_softmax",
     .surfaces = kShape, .access = &G::moe_router_pre_softmax,
     .help = "gates = the top-k of the softmax over all experts, not renormalised (Qwen2-MoE's "
             "norm_topk_prob false); default: the softmax over the top-k logits",
     .written = moe_not_default<&G::moe_router_pre_softmax>,
     .stored = moe_not_default<&G::moe_router_pre_softmax>},
    {.flag = flag::moe_aux_loss_coeff, .json_key = "moe_aux_loss_coeff",
     .surfaces = kMoeTraining, .access = &G::moe_aux_loss_coeff,
     .help = "coefficient of the Switch/GShard load-balancing loss (aux_loss or seq_aux_loss)",
     .written = moe_not_default<&G::moe_aux_loss_coeff>, .stored = moe},
    {.flag = flag::moe_z_loss_coeff, .json_key = "moe_z_loss_coeff", .surfaces = kMoeTraining,
     .access = &G::moe_z_loss_coeff,
     .help = "coefficient of the router z-loss (mean squared log-sum-exp of the logits)",
     .written = moe_not_default<&G::moe_z_loss_coeff>, .stored = moe},
    {.flag = flag::moe_load_balancing, .json_key = "moe_router_load_balancing_type",
     .surfaces = kMoeTraining,
     .access = ChoiceAccess<G>{[](const G& m) {
                                 return kBalancing[size_t(m.moe_load_balancing)];
                               },
                               [](G& m, std::string_view v) {
                                 for (size_t i = 0; i < kBalancing.size(); ++i)
                                   if (v == kBalancing[i]) m.moe_load_balancing = MoeLoadBalancing(i);
                               },
                               kBalancing},
     .help = "aux_loss (over the micro-batch), seq_aux_loss (per sequence, averaged) or none: "
             "the loss --moe-aux-loss-coeff multiplies",
     .written = moe_not_default<&G::moe_load_balancing>, .stored = moe},
    {.flag = flag::moe_capacity_factor, .json_key = "moe_expert_capacity_factor",
     .surfaces = kMoeTraining, .access = &G::moe_capacity_factor,
     .help = "each expert takes at most ceil(tokens x topk / experts x factor) of a "
             "micro-batch's tokens, the first in (sequence, position) order; the rest are "
             "dropped (unset: dropless)",
     .written = moe_not_default<&G::moe_capacity_factor>,
     .stored = moe_not_default<&G::moe_capacity_factor>, .hide_default = true},
    {.flag = flag::moe_shared_size, .json_key = "moe_shared_expert_intermediate_size",
     .surfaces = kShape, .access = &G::moe_shared_expert_intermediate_size,
     .help = "a shared expert in every MoE layer: one dense MLP of this width every token "
             "runs, its output added to the routed experts' (0: none)",
     // 0 is "not given"; a width given is >= 1.
     .range = FieldRange{0, int64_t(1) << 24, ">= 1"},
     .written = moe_not_default<&G::moe_shared_expert_intermediate_size>,
     .stored = moe_not_default<&G::moe_shared_expert_intermediate_size>, .hide_default = true},
    {.flag = flag::moe_shared_gate, .json_key = "moe_shared_expert_gate", .surfaces = kShape,
     .access = &G::moe_shared_expert_gate,
     .help = "scale the shared expert's output per token by sigmoid(x . w_gate) (Qwen2-MoE)",
     .written = moe_not_default<&G::moe_shared_expert_gate>,
     .stored = moe_not_default<&G::moe_shared_expert_gate>},
}};

}  // namespace

std::span<const Field<GPTConfig>> model_fields() { return kFields; }

const Field<GPTConfig>& model_field(std::string_view flag) {
  return field_of(model_fields(), flag, "GPTConfig");
}

std::string model_fields_text(const GPTConfig& m) {
  std::string out;
  out.reserve(160);
  for (const Field<GPTConfig>& f : kFields) {
    out += field_text(f, m).value_or("-");
    out += ' ';
  }
  return out;
}

}  // namespace tessera
