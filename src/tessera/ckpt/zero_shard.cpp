#include "tessera/ckpt/zero_shard.h"

namespace tessera::ckpt {

ShardView zero_shard_view(DataParallel& dp, int64_t tp_rank, int64_t pp_rank) {
  GPT& model = dp.model();
  AdamW& optim = dp.optimizer();
  const int dp_rank = dp.dp_group().rank();
  ShardView v;
  v.layout = &model.layout();
  v.tp_rank = tp_rank;
  v.pp_rank = pp_rank;
  v.dp_rank = dp_rank;
  if (dp.zero_stage() >= 3) {
    for (const FlatSegment& s : dp.partition().segments())
      v.params.push_back({s.global_begin, s.global_end, dp.param_shard().f32() + s.shard_offset});
  } else if (dp_rank == 0) {  // replicated: one copy is enough
    v.params.push_back({0, model.layout().numel(), model.params().f32()});
  }
  if (dp.zero_stage() >= 1 || dp_rank == 0)
    for (const FlatSegment& s : optim.segments()) {
      v.exp_avg.push_back({s.global_begin, s.global_end, optim.exp_avg().f32() + s.shard_offset});
      v.exp_avg_sq.push_back(
          {s.global_begin, s.global_end, optim.exp_avg_sq().f32() + s.shard_offset});
    }
  return v;
}

void load_zero_shard(const Checkpoint& ck, DataParallel& dp, bool with_optimizer) {
  // Shapes alone cannot tell a different head count, and a stage holds only
  // some layers: compare the configs, before a byte is read (train --load).
  check_same_model(ck, dp.model().config());
  const ParamLayout& L = dp.model().layout();
  if (dp.zero_stage() >= 3) {
    for (const FlatSegment& s : dp.partition().segments())
      load_params(ck, L, s.global_begin, s.global_end, dp.param_shard().f32() + s.shard_offset);
  } else {
    load_params(ck, L, 0, L.numel(), dp.model().params().f32());
  }
  if (!with_optimizer) return;
  AdamW& optim = dp.optimizer();
  for (const FlatSegment& s : optim.segments())
    load_optimizer(ck, L, s.global_begin, s.global_end, optim.exp_avg().f32() + s.shard_offset,
                   optim.exp_avg_sq().f32() + s.shard_offset);
}

}  // namespace tessera::ckpt
