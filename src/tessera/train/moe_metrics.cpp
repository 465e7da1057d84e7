#include "tessera/train/moe_metrics.h"

#include <algorithm>

#include "tessera/kernels/moe_stats.h"

namespace tessera {

void moe_step_metrics(const MoeStepSums& sums, const ParamLayout& layout, int64_t micro_batches,
                      StepStats& s) {
  using namespace kernels;
  int64_t moe_layers = 0;
  for (size_t l = 0; l < sums.layers.size(); ++l) {
    const std::vector<double>& v = sums.layers[l];
    if (v.size() <= size_t(kMoeStats)) continue;  // a dense layer
    ++moe_layers;
    s.moe_aux_loss += v[kMoeAuxLoss];
    s.moe_z_loss += v[kMoeZLoss];
    s.moe_dropped += int64_t(v[kMoeDropped]);
    // Tokens per expert over the step: max / mean (1 is perfect balance).
    const auto experts = v.begin() + kMoeStats;
    double total = 0;
    for (auto e = experts; e != v.end(); ++e) total += *e;
    const double mean = total / double(v.end() - experts);
    s.moe_imbalance[layout.layers()[l]] = mean > 0 ? *std::max_element(experts, v.end()) / mean : 0;
  }
  if (moe_layers == 0) return;
  s.moe = true;
  // Means over the micro-batches and layers: the values the coefficients multiply.
  const double n = double(moe_layers) * double(std::max<int64_t>(micro_batches, 1));
  s.moe_aux_loss /= n;
  s.moe_z_loss /= n;
}

}  // namespace tessera
