#include "tessera/plan/moe_cost.h"

#include <algorithm>

#include "tessera/plan/comm_model.h"

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
  const double moe = experts + 2 * k + 2 * k + 8 * double(m.num_experts) / h;
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) moe_layers += m.moe_layer(l);
  const double share = double(moe_layers) / double(m.num_layers);
  return share * moe + (1 - share) * dense_units;
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

}  // namespace tessera::plan
