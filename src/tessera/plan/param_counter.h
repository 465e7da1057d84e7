// Parameters held by one rank of a pipeline stage, from the engine's
// ParamLayout (never recounted here), cached per (tp, pp, v, stage) because
// the search asks for the same stages of many layouts.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"

namespace tessera::plan {

class ParamCounter {
 public:
  explicit ParamCounter(const GPTConfig& model) : model_(model) {}
  // Elements in the flat parameter buffer of (tp rank 0, pipeline `stage`):
  // its slice of the padded vocabulary included, as the engine allocates.
  int64_t stage_params(const ParallelConfig& par, int64_t stage);
  // Of those, the elements of the stage's expert units (ParamUnit::expert,
  // padding included) on a rank of par.ep expert-parallel ranks: its
  // E / ep experts of every MoE layer.
  int64_t stage_expert_numel(const ParallelConfig& par, int64_t stage);
  // One transformer layer's parameters on tp rank 0.
  int64_t layer_params(int64_t tp);
  // The whole model, one copy (ParamLayout::count_model_params).
  int64_t model_params() const;
  const GPTConfig& model() const { return model_; }

 private:
  GPTConfig model_;
  std::mutex mu_;
  // (tp x 1000003 + dp, pp, v, stage, first stage layers, last stage layers; 0: even)
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, int64_t> cache_;
  // stage_expert_numel's: (the same key, ep)
  std::map<std::pair<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, int64_t>,
           int64_t>
      expert_cache_;
};

}  // namespace tessera::plan
