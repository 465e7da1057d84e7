#include "tessera/plan/moe_cost.h"

#include <algorithm>

#include <string_view>

#include "tessera/plan/comm_model.h"
#include "tessera/plan/context_parallel_cost.h"
#include "tessera/plan/layer_ops.h"

namespace tessera::plan {

double moe_row_factor(const GPTConfig& m, int64_t tokens) {
  if (!m.moe() || m.moe_dropless()) return 1.0;
  const double routed = double(tokens) * double(m.moe_router_topk);
  return double(m.num_experts) * double(m.moe_capacity(tokens)) / routed;
}

double moe_mlp_activation_units(const GPTConfig& m, double dense_units, int64_t tokens) {
  if (!m.moe()) return dense_units;
  const double h = double(m.hidden_size), k = double(m.moe_router_topk);
  // The experts have the dense MLP's width (GPTConfig::num_experts): the
  // dense term per routed row.
  const double experts = k * moe_row_factor(m, tokens) * dense_units;
  double moe = experts + 2 * k + 2 * k + 8 * double(m.num_experts) / h;
  // The shared expert: a dense MLP of width S on every token (the dense
  // term scaled by S / F), and under its gate the fp32 output it keeps
  // (2 words of h) and the gate (2 / h).
  if (m.moe_shared())
    moe += dense_units * double(m.moe_shared_expert_intermediate_size) / double(m.ffn()) +
           (m.moe_shared_expert_gate ? 2 + 2 / h : 0.0);
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) moe_layers += m.moe_layer(l);
  const double share = double(moe_layers) / double(m.num_layers);
  return share * moe + (1 - share) * dense_units;
}

double moe_whole_activation_units(const GPTConfig& m) {
  if (!m.moe()) return 0;
  const double h = double(m.hidden_size), k = double(m.moe_router_topk);
  double whole = 2 * k + 2 * k + 8 * double(m.num_experts) / h;
  if (m.moe_shared() && m.moe_shared_expert_gate) whole += 2 + 2 / h;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) moe_layers += m.moe_layer(l);
  return whole * double(moe_layers) / double(m.num_layers);
}

MoeAllToAll moe_all_to_all(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                           int64_t ep, int64_t stride) {
  MoeAllToAll a;
  if (!m.moe() || ep <= 1) return a;
  const int64_t tokens = L.par.micro_batch * (m.seq_length / L.par.cp);  // a cp rank's
  // Each rank's routed rows (its tokens' K choices, padded or dropped to
  // capacity) of hidden size, in the activations' type.
  const double bytes = double(tokens) * double(m.moe_router_topk) * moe_row_factor(m, tokens) *
                       double(m.hidden_size) * double(activation_element_bytes(L.precision));
  const double one = collective_cost(sys, CommOp::AllToAll, bytes, ep, stride, L.devices()).seconds;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) moe_layers += m.moe_layer(l);
  const double share = double(moe_layers) / double(m.num_layers);
  a.forward = 2 * one * share;   // dispatch, combine (an average layer)
  a.backward = 2 * one * share;  // their gradients
  return a;
}

double moe_imbalance_factor(double measured, int64_t ep) {
  if (ep <= 1 || measured <= 1.0) return 1.0;
  return std::min(measured, double(ep));
}

int64_t moe_ep(const PlanLayout& L) { return L.par.ep; }

double moe_expert_params(const GPTConfig& m, int64_t tp) {
  const double h = double(m.hidden_size), t = double(tp);
  // fc and proj split over tp (ParamLayout), the proj bias replicated.
  double p = (double(m.fc_width()) + double(m.ffn())) * h / t;
  if (m.add_bias_linear) p += double(m.fc_width()) / t + h;
  return p;
}

double moe_stage_expert_params(const GPTConfig& m, const ParallelConfig& par, int64_t stage) {
  if (!m.moe()) return 0;
  int64_t layers = 0;
  for (int64_t l : par.stage_layer_list(m.num_layers, stage)) layers += m.moe_layer(l);
  return double(layers) * double(m.num_experts) * moe_expert_params(m, par.tp);
}

MemoryBytes moe_stage_state(ParamCounter& params, const ParallelConfig& par, int64_t stage,
                            const StateBytesPerParam& per, int64_t ep) {
  const int64_t group = dp_cp(par);
  ParallelConfig one = par, mine = par;
  one.ep = 1;
  mine.ep = ep;
  // The dense units: the stage's layout less its expert units (all E
  // experts at ep 1); the rank's expert units at ep.
  const double dense =
      double(params.stage_params(par, stage)) - double(params.stage_expert_numel(one, stage));
  const double experts = double(params.stage_expert_numel(mine, stage));
  MemoryBytes b = zero_state_bytes(dense, experts, per, par.zero_stage, group,
                                   std::max<int64_t>(1, group / ep));
  b.activations = 0;
  return b;
}

MoePhaseSeconds moe_imbalance_seconds(const OpList& ol, const SystemSpec& sys, const PlanLayout& L,
                                      double factor) {
  MoePhaseSeconds out;
  if (factor <= 1.0) return out;
  for (const OpEntry& e : ol.layer) {
    if (e.cls != OpClass::Gemm || !std::string_view(e.kernel).starts_with("grouped_matmul")) continue;
    const double extra = (factor - 1.0) * op_seconds(e, sys, L);
    (e.phase == OpPhase::Forward ? out.forward
     : e.phase == OpPhase::Backward ? out.backward : out.recompute) += extra;
  }
  return out;
}

}  // namespace tessera::plan
