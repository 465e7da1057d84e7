#include "tessera/plan/moe_report.h"

#include <fmt/format.h>

#include "tessera/plan/context_parallel_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/moe_cost.h"
#include "tessera/plan/param_counter.h"

namespace tessera::plan {

std::string moe_ep_report(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& best) {
  if (!m.moe()) return "";
  const PlanLayout& L = best.layout;
  const auto& par = L.par;
  const int64_t E = m.num_experts, K = m.moe_router_topk;
  // The peak stage's MoE layers (the even share; uneven ends differ a little).
  const int64_t layers = par.stage_layer_count(m.num_layers, best.peak_stage);
  int64_t moe_layers = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) moe_layers += m.moe_layer(l);
  const double stage_moe_layers = double(layers) * double(moe_layers) / double(m.num_layers);
  // A rank's: the experts split over tp (experts under TP), as the engine holds them.
  const double experts = stage_moe_layers * double(E) * moe_expert_params(m, par.tp);
  const StateBytesPerParam per =
      L.engine ? engine_state_bytes_per_param(L.precision) : state_bytes_per_param(L.precision);
  const int64_t group = dp_cp(par);
  const double all_experts = double(moe_layers) * double(E) * moe_expert_params(m);
  const double total = double(ParamCounter(m).model_params());
  std::string out = fmt::format(
      "\nmixture of experts: {} experts, top {}: {:.1f}% of the {:.2f}B parameters are experts;\n"
      "  a token runs {} of them{}\n",
      E, K, 100.0 * all_experts / total, total / 1e9, K,
      m.moe_dropless() ? " (dropless)"
                       : fmt::format(" (capacity factor {}: {:.2f}x the routed rows)",
                                     m.moe_capacity_factor,
                                     moe_row_factor(m, par.micro_batch * m.seq_length)));
  out += fmt::format(
      "  expert parallelism: ep ranks of the dp x cp group of {} each hold E / ep experts,\n"
      "  their state ZeRO-{} sharded over the dp x cp / ep ranks that hold the same ones:\n",
      group, par.zero_stage);
  out += fmt::format("  {:>4} {:>18} {:>22}\n", "ep", "expert state/rank", "all-to-all per step");
  const double steps_layers =
      double(L.micro_batches() * par.virtual_stages) * double(par.chunk_layer_count(m.num_layers, best.peak_stage));
  for (int64_t ep = 1; ep <= std::min<int64_t>(E, group); ep *= 2) {
    if (E % ep || group % ep) continue;
    const MemoryBytes st = zero_state_bytes(experts / double(ep), per, par.zero_stage, group / ep);
    const MoeAllToAll a = moe_all_to_all(m, sys, L, ep, par.tp);
    const double a2a = steps_layers * (a.forward + a.backward);
    out += fmt::format("  {:>4} {:>15.2f} GB {:>20.3f} s{}\n", ep, st.total() / 1e9, a2a,
                       ep == par.ep ? "  <- this plan" : "");
  }
  // Why this ep: the search priced every ep with every other setting
  // (expert memory per rank, the all-to-all in each layer) and kept the
  // fastest layout that fits; the rows above are that trade in this layout.
  out += fmt::format(
      "  ep {} is the search's fastest fitting layout over every ep ({:.3f} s a step, {:.1f} of\n"
      "  {:.1f} GB): {}\n",
      par.ep, best.time.step, best.peak_memory / 1e9, sys.usable_memory() / 1e9,
      par.ep == 1 ? "the experts fit on every rank, so a larger ep would only add all-to-all"
                  : "the memory a smaller ep would need, or the layout it frees, outweighs "
                    "the all-to-all above");
  if (par.ep > 1 && !L.engine)
    out += "  (tessera train refuses --expert-model-parallel-size > 1 until its engine runs it)\n";
  return out;
}

}  // namespace tessera::plan
