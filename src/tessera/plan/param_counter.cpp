#include "tessera/plan/param_counter.h"

#include "tessera/model/param_layout.h"

namespace tessera::plan {

namespace {

// Only tp, pp, v, the placement, the split, dp (units padded to 16 dp) and,
// for the experts, ep shape the layout.
ParallelConfig layout_shape(const ParallelConfig& par) {
  ParallelConfig shape;
  shape.tp = par.tp;
  shape.dp = par.dp;
  shape.pp = par.pp;
  shape.virtual_stages = par.virtual_stages;
  if (par.placement() == ChunkPlacement::V) shape.schedule = ScheduleKind::ZeroBubbleV;
  shape.first_stage_layers = par.first_stage_layers;
  shape.last_stage_layers = par.last_stage_layers;
  return shape;
}

std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t> layout_key(
    const ParallelConfig& par, int64_t stage) {
  // The chunks' placement (zbv's V: both ends on rank 0) rides with v.
  const bool v_shape = par.placement() == ChunkPlacement::V;
  return std::make_tuple(par.tp * 1000003 + par.dp, par.pp, par.virtual_stages * 2 + v_shape,
                         stage, par.first_stage_layers.value_or(0),
                         par.last_stage_layers.value_or(0));
}

}  // namespace

int64_t ParamCounter::stage_params(const ParallelConfig& par, int64_t stage) {
  auto key = layout_key(par, stage);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  int64_t n = ParamLayout::build(model_, layout_shape(par), 0, stage).numel();
  std::lock_guard<std::mutex> lock(mu_);
  cache_[key] = n;
  return n;
}

int64_t ParamCounter::stage_expert_numel(const ParallelConfig& par, int64_t stage) {
  if (!model_.moe()) return 0;
  auto key = std::make_pair(layout_key(par, stage), par.ep);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = expert_cache_.find(key);
    if (it != expert_cache_.end()) return it->second;
  }
  ParallelConfig shape = layout_shape(par);
  shape.ep = par.ep;
  int64_t n = ParamLayout::build(model_, shape, 0, stage).expert_numel();
  std::lock_guard<std::mutex> lock(mu_);
  expert_cache_[key] = n;
  return n;
}

int64_t ParamCounter::layer_params(int64_t tp) {
  auto key = std::make_tuple(tp, int64_t(-1), int64_t(-1), int64_t(-1), int64_t(0), int64_t(0));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  ParallelConfig shape;
  shape.tp = tp;
  int64_t n = 0;
  // A layer's shapes do not depend on how many there are: a one-layer model
  // gives layer 0 without building every layer (a model file may ask for
  // 65,536 of them, and the whole layout then took seconds).
  GPTConfig one = model_;
  one.num_layers = 1;
  const ParamLayout layout = ParamLayout::build(one, shape, 0, 0);
  for (const auto& e : layout.entries())
    if (e.layer == 0) n += e.numel();
  std::lock_guard<std::mutex> lock(mu_);
  cache_[key] = n;
  return n;
}

int64_t ParamCounter::model_params() const { return ParamLayout::count_model_params(model_); }

}  // namespace tessera::plan
