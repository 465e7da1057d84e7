#include "tessera/ckpt/zero_shard.h"

namespace tessera::ckpt {

namespace {

// Stages below 3 replicate parameters (and stage 0 the moments) over a
// unit's group: one copy is enough, the group's rank 0's: dp x cp rank 0
// for dense units, expert-dp rank 0 (one per ep rank: each holds other
// experts) for expert units. base: the whole flat buffer's kind.
std::vector<DataRange> replicated_ranges(const DataParallel& dp, float* base) {
  std::vector<DataRange> out;
  for (const ParamUnit& u : dp.model().layout().units()) {
    const comm::Communicator& g = u.expert ? dp.expert_dp_group() : dp.dp_group();
    if (g.rank() != 0) continue;
    if (!out.empty() && out.back().end == u.begin)
      out.back().end = u.end;  // adjacent: one range
    else
      out.push_back({u.begin, u.end, base + u.begin});
  }
  return out;
}

}  // namespace

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
  } else {
    v.params = replicated_ranges(dp, model.params().f32());
  }
  if (dp.zero_stage() >= 1) {
    for (const FlatSegment& s : optim.segments()) {
      v.exp_avg.push_back({s.global_begin, s.global_end, optim.exp_avg().f32() + s.shard_offset});
      v.exp_avg_sq.push_back(
          {s.global_begin, s.global_end, optim.exp_avg_sq().f32() + s.shard_offset});
    }
  } else {  // stage 0: one segment, the whole buffer (shard offset = global)
    v.exp_avg = replicated_ranges(dp, optim.exp_avg().f32());
    v.exp_avg_sq = replicated_ranges(dp, optim.exp_avg_sq().f32());
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
