#include "tessera/parallel/data_parallel.h"

#include <algorithm>

#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/model/weights.h"

namespace tessera {

using comm::ReduceOp;

DataParallel::DataParallel(GPT& model, comm::Communicator& dp, int zero_stage,
                           const AdamWConfig& optim, comm::Communicator* tp,
                           comm::Communicator* pp, const DataParallelOptions& options)
    : model_(model),
      dp_(dp),
      tp_(tp && tp->size() > 1 ? tp : nullptr),
      pp_(pp && pp->size() > 1 ? pp : nullptr),
      opt_(options),
      stage_(zero_stage),
      edp_(options.expert_dp ? options.expert_dp : &dp),
      ep_(options.ep && options.ep->size() > 1 ? options.ep : nullptr),
      part_(model.layout(), dp.size(), dp.rank(), edp_->size(), edp_->rank()) {
  const ParamLayout& L = model.layout();
  TESSERA_CHECK(L.unit_align() % (16 * dp.size()) == 0,
                "the parameter layout was built for another data-parallel size");
  // Expert units are reduced and sharded over the ranks holding the same
  // experts: dp x cp / ep of them, the ep group the rest of dp x cp.
  const int64_t ep = ep_ ? ep_->size() : 1;
  TESSERA_CHECK(L.ep() == ep && edp_->size() * ep == dp.size(),
                "DataParallel: a layout of {} expert-parallel ranks with an ep group of {} and an "
                "expert-data-parallel group of {} of {} data-parallel ranks",
                L.ep(), ep, edp_->size(), dp.size());
  check_parallel_range(flag::zero_stage, stage_);
  TESSERA_CHECK((model.params().numel() > 0) == (stage_ < 3) &&
                    (model.grads().numel() > 0) == (stage_ < 2),
                "DataParallel: the model's buffers do not match ZeRO stage {}", stage_);
  const auto& units = L.units();
  for (int64_t layer : L.layers()) {
    layer_units_.emplace_back();
    for (size_t u = 0; u < units.size(); ++u)
      if (units[u].layer == layer) layer_units_.back().push_back(u);
  }
  for (size_t u = 0; u < units.size(); ++u)
    if (units[u].layer < 0) root_units_.push_back(u);
  if (stage_ == 0)
    optim_ = std::make_unique<AdamW>(L, optim);
  else
    optim_ = std::make_unique<AdamW>(L, part_.segments(), part_.shard_numel(), optim);
  if (stage_ >= 3) param_shard_.allocate(part_.shard_numel());
  if (stage_ >= 3 && lowp()) lowp_shard_.assign(size_t(part_.shard_numel()), 0);
  if (stage_ >= 2) grad_shard_.allocate(part_.shard_numel());
  const bool tp_rank0 = !tp_ || tp_->rank() == 0;
  const bool tied_copy = pp_ && !L.has_embedding();  // the head's copy of wte
  for (const ParamEntry& e : L.entries()) {
    if (e.split == TpSplit::None && !tp_rank0) continue;
    if (tied_copy && e.name == "wte") continue;
    const int64_t e0 = e.offset, e1 = e.offset + e.numel();
    if (stage_ == 0) {
      norm_ranges_.push_back({e0, e1 - e0, e.ep_split});
      continue;
    }
    for (const FlatSegment& s : part_.segments()) {
      const int64_t a = std::max(e0, s.global_begin), z = std::min(e1, s.global_end);
      if (a >= z) continue;
      norm_ranges_.push_back(
          {stage_ == 1 ? a : s.shard_offset + (a - s.global_begin), z - a, e.ep_split});
    }
  }
  gathered_.resize(units.size());
  reduction_started_.assign(units.size(), 0);
  gathered_lowp_.resize(units.size());
  unit_grads_.resize(units.size());
}

DataParallel::~DataParallel() {
  // Outstanding reductions must finish before their buffers go away.
  for (auto& p : pending_) p.work.wait();
}

void DataParallel::init_params(uint64_t seed) {
  working_fresh_ = false;
  if (stage_ < 3) {
    model_.init(seed);
    return;
  }
  // Only the shard is kept: draw one unit at a time and keep this rank's slice.
  const ParamLayout& L = model_.layout();
  for (size_t u = 0; u < L.units().size(); ++u) {
    const ParamUnit& unit = L.units()[u];
    Buffer tmp(unit.numel());  // (unit numel)
    init_unit_weights(L, model_.config(), unit, tmp.f32(), seed);
    const FlatSegment& s = part_.segment(u);
    // Initialisation, not a step's work: charged to nothing.
    ops(nullptr).copy(param_shard_.f32() + s.shard_offset,
                      tmp.f32() + (s.global_begin - unit.begin), s.size(), Op::Data);
  }
}

// ---- stage 3: gathering parameters -----------------------------------------

namespace {

// The smallest spare that holds n elements, moved out of `spares`; or a new
// one when none does. The caller writes every element it uses.
Buffer take_spare(std::vector<Buffer>& spares, int64_t n) {
  auto best = spares.end();
  for (auto it = spares.begin(); it != spares.end(); ++it)
    if (it->numel() >= n && (best == spares.end() || it->numel() < best->numel())) best = it;
  if (best == spares.end()) return Buffer(n);
  Buffer b = std::move(*best);
  spares.erase(best);
  return b;
}

std::vector<uint16_t> take_spare(std::vector<std::vector<uint16_t>>& spares, size_t n) {
  auto best = spares.end();
  for (auto it = spares.begin(); it != spares.end(); ++it)
    if (it->size() >= n && (best == spares.end() || it->size() < best->size())) best = it;
  std::vector<uint16_t> v;
  if (best != spares.end()) {
    v = std::move(*best);
    spares.erase(best);
  }
  v.resize(n);  // shrinking keeps the allocation; a new one is sized once
  return v;
}

}  // namespace

void DataParallel::gather_unit(size_t u) {
  const ParamUnit& unit = model_.layout().units()[u];
  const FlatSegment& s = part_.segment(u);
  if (!lowp()) {
    ProfileScope t(opt_.profile, Op::Comm);
    gathered_[u] = take_spare(spare_gathered_, unit.numel());
    group(u).all_gather(param_shard_.f32() + s.shard_offset, gathered_[u].f32(), size_t(s.size()),
                   Precision::Fp32);
    model_.bind_unit(unit, gathered_[u].f32(), nullptr);
    return;
  }
  // --bf16 / --fp16: the 16-bit shards travel (2 bytes an element, not 4);
  // the GEMMs read them as gathered, the other kernels from their fp32
  // widening (exact: every 16-bit value is an fp32 value).
  std::vector<uint16_t>& lp = gathered_lowp_[u];  // (unit numel)
  {
    ProfileScope t(opt_.profile, Op::Comm);
    lp = take_spare(spare_gathered_lowp_, size_t(unit.numel()));
    group(u).all_gather(lowp_shard_.data() + s.shard_offset, lp.data(), size_t(s.size()),
                        model_.precision());
  }
  gathered_[u] = take_spare(spare_gathered_, unit.numel());
  ops(opt_.profile).cast(gathered_[u].f32(), lowp_view(lp.data()), unit.numel());  // Op::Cast
  model_.bind_unit(unit, gathered_[u].f32(), nullptr, lp.data());
}

void DataParallel::release_unit(size_t u) {
  if (gathered_[u].numel() > 0) spare_gathered_.push_back(std::move(gathered_[u]));
  gathered_[u] = Buffer();
  if (!gathered_lowp_[u].empty()) spare_gathered_lowp_.push_back(std::move(gathered_lowp_[u]));
  gathered_lowp_[u] = std::vector<uint16_t>();
}

void DataParallel::refresh_working_copy() {
  if (stage_ < 3) {
    model_.refresh_working_copy(opt_.profile);
    return;
  }
  lowp_shard_.resize(size_t(part_.shard_numel()));
  ops(opt_.profile).cast(lowp_view(lowp_shard_.data()), param_shard_.f32(),
                     part_.shard_numel());  // Op::Cast
}

void DataParallel::begin_step() {
  // The working copy is written by each optimizer step; it is remade here
  // only after init or load. (An evaluation after a step reuses it as is:
  // the weights have not changed since.)
  if (lowp() && !working_fresh_) refresh_working_copy();
  working_fresh_ = true;
  if (stage_ >= 3)
    for (size_t u : root_units_) gather_unit(u);
  for (size_t u : root_units_) wait_param_gather(u);
}

void DataParallel::before_forward(size_t layer) {
  for (size_t u : layer_units_[layer]) {
    if (stage_ >= 3) gather_unit(u);
    wait_param_gather(u);
  }
}

void DataParallel::after_forward(size_t layer) {
  if (stage_ >= 3)
    for (size_t u : layer_units_[layer]) release_unit(u);
}

// ---- gradients ---------------------------------------------------------------

void DataParallel::begin_micro_batch(bool last) {
  last_micro_batch_ = last;
  if (stage_ < 2) return;
  // The root units' gradients build up over the whole backward (the tied
  // head at its start, the embedding at its end).
  for (size_t u : root_units_) {
    unit_grads_[u] = take_zeroed_grads(model_.layout().units()[u].numel());
    model_.bind_unit(model_.layout().units()[u], nullptr, unit_grads_[u].f32());
  }
}

Buffer DataParallel::take_zeroed_grads(int64_t n) {
  Buffer b = take_spare(spare_grads_, n);
  // Backward accumulates into it (charged with the gradient sums).
  ops(opt_.profile).fill(b.f32(), 0.0f, n, Op::Residual);
  return b;
}

void DataParallel::give_back(Buffer&& b) {
  if (b.numel() > 0) spare_grads_.push_back(std::move(b));
  b = Buffer();
}

void DataParallel::before_backward(size_t layer) {
  for (size_t u : layer_units_[layer]) {
    if (stage_ >= 3) gather_unit(u);
    // A split backward's buffer lives from the unit's first input pass of the
    // step to its chunk's last weight pass: later passes add to it.
    if (stage_ >= 2 && !(opt_.split_backward && unit_grads_[u].numel() > 0)) {
      unit_grads_[u] = take_zeroed_grads(model_.layout().units()[u].numel());
      model_.bind_unit(model_.layout().units()[u], nullptr, unit_grads_[u].f32());
    }
  }
}

void DataParallel::after_backward_input(size_t layer) {
  // Its weight pass gathers them again (before_backward_weight): holding
  // them until then would hold every layer between the two passes.
  if (stage_ >= 3)
    for (size_t u : layer_units_[layer]) release_unit(u);
}

void DataParallel::before_backward_weight(size_t layer) {
  if (stage_ >= 3)
    for (size_t u : layer_units_[layer]) gather_unit(u);
}

void DataParallel::after_backward(size_t layer) {
  const std::vector<size_t>& units = layer_units_[layer];  // the dense unit, then an MoE layer's experts
  if (stage_ >= 3)
    for (size_t u : units) release_unit(u);
  if (stage_ >= 2 && opt_.split_backward && !last_micro_batch_) {
    // Not the chunk's last weight pass: the unit's gradient is still
    // building up (the later input passes' norms, weight passes' GEMMs).
    retire(kKeepAll);  // free what has finished
    return;
  }
  if (!opt_.overlap_grad_reduce && stage_ < 2) {
    // Reduced after the whole backward (end_micro_batch), as Megatron does
    // without --overlap-grad-reduce.
    for (size_t u : units)
      if (last_micro_batch_ && group(u).size() > 1) deferred_reductions_.push_back(u);
    return;
  }
  for (size_t u : units) start_grad_reduction(u);
  // Without --overlap-grad-reduce, ZeRO-2/3 bound the gradient held: a
  // unit's buffer is freed once reduced, so deferring all of them would hold
  // the whole gradient. They wait for the reduction issued one layer before,
  // not this one (at most two units' gradients live): waiting for a unit's
  // own reduction right after its backward made every layer a rendezvous
  // of the dp ranks, each layer's skew between them waited out on its own,
  // where ZeRO-1 waits once for the net skew of the whole backward.
  retire(/*keep=*/opt_.overlap_grad_reduce ? kKeepAll : units.size());  // else free what has finished
}

void DataParallel::start_grad_reduction(size_t u) {
  comm::Communicator& dp = group(u);  // dp x cp, or expert_dp for an expert unit
  if (dp.size() == 1 && stage_ < 2) return;  // nothing to reduce
  if (stage_ < 2 && !last_micro_batch_) return;  // accumulate locally first
  if (stage_ < 2) {
    if (reduction_started_[u]) return;  // once a step
    reduction_started_[u] = 1;
  }
  const ParamUnit& unit = model_.layout().units()[u];
  const FlatSegment& s = part_.segment(u);
  ProfileScope t(opt_.profile, Op::Comm);
  Pending p;
  p.shard_offset = s.shard_offset;
  if (opt_.grad_reduce_bf16 && dp.size() > 1) {
    const float* g = stage_ < 2 ? model_.grads().f32() + unit.begin : unit_grads_[u].f32();
    start_bf16_reduction(p, u, g);
    if (stage_ >= 2) give_back(std::move(unit_grads_[u]));  // the bf16 copy is what travels
  } else if (stage_ == 0) {
    float* g = model_.grads().f32() + unit.begin;
    p.work = dp.all_reduce_async(g, size_t(unit.numel()), Precision::Fp32, ReduceOp::Sum);
  } else if (stage_ == 1) {
    // In place: this rank's slice of the unit receives the sum.
    float* g = model_.grads().f32();
    p.work = dp.reduce_scatter_async(g + unit.begin, g + s.global_begin, size_t(s.size()),
                                     Precision::Fp32, ReduceOp::Sum);
  } else {
    p.recv = take_spare(spare_grads_, s.size());  // the reduce-scatter writes all it uses
    p.recv_n = s.size();
    p.unit_grads = std::move(unit_grads_[u]);
    p.work = dp.reduce_scatter_async(p.unit_grads.f32(), p.recv.f32(), size_t(s.size()),
                                     Precision::Fp32, ReduceOp::Sum);
  }
  pending_.push_back(std::move(p));
}

// --grad-reduce-in-bf16. What the rounding costs: each rank's gradient,
// accumulated in fp32 over its micro-batches, is rounded once to bf16 (a
// relative error of at most 2^-9 per element), and every ring step or
// pairwise combination rounds the partial sum again, so a reduced element
// carries up to about dp * 2^-9 of the sum of its contributions'
// magnitudes; where ranks' contributions cancel, that is large relative to
// the result. Small gradient elements keep bf16's full range (no underflow
// as in fp16), and the result is widened back exactly into fp32, where it is
// clipped, unscaled and used by AdamW. Megatron offers the same trade
// (--grad-reduce-in-bf16); its default, and ours, reduces in fp32.
void DataParallel::start_bf16_reduction(Pending& p, size_t u, const float* g) {
  const ParamUnit& unit = model_.layout().units()[u];
  const FlatSegment& s = part_.segment(u);
  p.lowp.resize(size_t(unit.numel()));
  ops(opt_.profile).cast(kernels::Act(p.lowp.data(), Precision::Bf16), g, unit.numel());
  if (stage_ == 0) {
    p.lowp_at = 0;
    p.lowp_n = unit.numel();
    p.widen_to = model_.grads().f32() + unit.begin;
    p.work = group(u).all_reduce_async(p.lowp.data(), size_t(unit.numel()), Precision::Bf16,
                                       ReduceOp::Sum);
    return;
  }
  // In place: this rank's slice of the bf16 unit receives the sum.
  p.lowp_at = s.global_begin - unit.begin;
  p.lowp_n = s.size();
  if (stage_ == 1) p.widen_to = model_.grads().f32() + s.global_begin;
  uint16_t* x = p.lowp.data();
  p.work = group(u).reduce_scatter_async(x, x + p.lowp_at, size_t(s.size()), Precision::Bf16,
                                         ReduceOp::Sum);
}

void DataParallel::retire(size_t keep) {
  // Reductions complete in issue order (one stream per group).
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    if (pending_.size() > keep) {
      ProfileScope t(opt_.profile, Op::Comm);
      p.work.wait();
    } else if (!p.work.test()) {
      return;
    }
    if (!p.lowp.empty()) {
      // (lowp_n) the reduced bf16 part
      const kernels::ConstAct x(p.lowp.data() + p.lowp_at, Precision::Bf16);
      if (p.widen_to)
        ops(opt_.profile).cast(p.widen_to, x, p.lowp_n);  // Op::Cast
      else
        ops(opt_.profile).accumulate(grad_shard_.f32() + p.shard_offset, x, p.lowp_n);
    } else if (stage_ >= 2) {
      ops(opt_.profile).accumulate(grad_shard_.f32() + p.shard_offset, p.recv.f32(), p.recv_n);
    }
    give_back(std::move(p.recv));
    give_back(std::move(p.unit_grads));
    pending_.pop_front();
  }
}

void DataParallel::end_micro_batch() {
  for (size_t u : deferred_reductions_) start_grad_reduction(u);
  deferred_reductions_.clear();
  for (size_t u : root_units_) start_grad_reduction(u);
  retire(/*keep=*/0);
  if (last_micro_batch_) std::fill(reduction_started_.begin(), reduction_started_.end(), 0);
}

void DataParallel::reduce_all() {
  TESSERA_CHECK(stage_ < 2, "reduce_all: ZeRO-{} reduces during backward", stage_);
  const bool saved = last_micro_batch_;
  last_micro_batch_ = true;
  // In unit order, skipping those a chunk's last backward already started.
  for (size_t u = 0; u < model_.layout().units().size(); ++u) start_grad_reduction(u);
  retire(/*keep=*/0);
  std::fill(reduction_started_.begin(), reduction_started_.end(), 0);
  last_micro_batch_ = saved;
}

void DataParallel::begin_chunk_backward(bool last) {
  TESSERA_CHECK(stage_ < 2 || opt_.split_backward,
                "begin_chunk_backward: ZeRO-{} reduces every backward", stage_);
  // after_backward starts a layer's reduction only on its last micro-batch
  // (stages 2-3 under a split backward must: their buffer is freed once
  // reduced, so there is nothing to defer to ReduceGrads).
  last_micro_batch_ = last && (opt_.overlap_grad_reduce || stage_ >= 2);
}

void DataParallel::end_chunk_backward() {
  last_micro_batch_ = false;
  retire(/*keep=*/kKeepAll);  // free what has finished; backward goes on
}

double DataParallel::grad_norm_squared() {
  const float* g = stage_ >= 2 ? grad_shard_.f32() : model_.grads().f32();
  double local = 0, experts = 0;
  // The caller charges the whole of the norm to Op::GradNorm (trainer.cpp).
  for (const NormRange& r : norm_ranges_)
    (r.expert && stage_ == 0 && ep_ ? experts : local) += ops(nullptr).sum_squares(g + r.at, r.n);
  ProfileScope t(opt_.profile, Op::Comm);
  // Stage 0 holds the whole reduced gradient on every dp rank (the experts:
  // this rank's, which its ep group's other ranks do not hold: summed over
  // it); the others hold disjoint parts of it, expert slices too (each
  // expert-dp rank a slice of its ep rank's experts).
  if (stage_ == 0 && ep_) experts = ep_->all_reduce_scalar(experts, ReduceOp::Sum);
  local += experts;
  // In double, as one rank keeps it: a float cast would turn a huge finite
  // norm into inf on some layouts and not others (issue 15, defect 10).
  if (tp_) local = tp_->all_reduce_scalar(local, ReduceOp::Sum);
  if (pp_) local = pp_->all_reduce_scalar(local, ReduceOp::Sum);
  if (stage_ >= 1 && dp_.size() > 1) local = dp_.all_reduce_scalar(local, ReduceOp::Sum);
  return local;
}

void DataParallel::optimizer_step(float lr, float grad_scale, int64_t step) {
  // --bf16 / --fp16: AdamW writes the working copy of what it updates.
  const kernels::Act working =
      !lowp() ? kernels::Act()
              : lowp_view(stage_ >= 3 ? lowp_shard_.data() : model_.working_copy());
  const kernels::Ops o = ops(opt_.profile);  // Op::Optimizer
  switch (stage_) {
    case 0:
    case 1:
      optim_->step(o, model_.params().f32(), Indexing::Global, model_.grads().f32(),
                   Indexing::Global, lr, grad_scale, step, working);
      // AdamW zeroed the slices it read; under stage 1 the rest of the
      // buffer holds this rank's unreduced sums.
      if (stage_ == 1) o.fill(model_.grads().f32(), 0.0f, model_.grads().numel(), Op::Optimizer);
      break;
    case 2:
      optim_->step(o, model_.params().f32(), Indexing::Global, grad_shard_.f32(), Indexing::Shard,
                   lr, grad_scale, step, working);
      break;
    default:
      optim_->step(o, param_shard_.f32(), Indexing::Shard, grad_shard_.f32(), Indexing::Shard, lr,
                   grad_scale, step, working);
  }
  if (stage_ == 1 || stage_ == 2) {
    // Every rank updated its slice of each unit: gather the units in place.
    ProfileScope t(opt_.profile, Op::Comm);
    float* p = model_.params().f32();
    param_gathers_.resize(part_.segments().size());
    for (size_t u = 0; u < part_.segments().size(); ++u) {
      const FlatSegment& s = part_.segment(u);
      const ParamUnit& unit = model_.layout().units()[u];
      param_gathers_[u] = group(u).all_gather_async(p + s.global_begin, p + unit.begin,
                                                    size_t(s.size()), Precision::Fp32);
    }
    if (!opt_.overlap_param_gather) finish_param_gather();
  }
  working_fresh_ = true;
}

void DataParallel::wait_param_gather(size_t u) {
  if (u >= param_gathers_.size() || param_gathers_[u].done()) return;
  {
    ProfileScope t(opt_.profile, Op::Comm);
    param_gathers_[u].wait();
  }
  if (lowp()) cast_gathered_slices(u);
}

void DataParallel::finish_param_gather() {
  for (size_t u = 0; u < param_gathers_.size(); ++u) wait_param_gather(u);
}

void DataParallel::cast_gathered_slices(size_t u) {
  if (group(u).size() == 1) return;
  const float* p = model_.params().f32();
  uint16_t* w = model_.working_copy();
  const auto cast = [&](int64_t a, int64_t z) {  // Op::Cast
    ops(opt_.profile).cast(lowp_view(w + a), p + a, z - a);
  };
  const FlatSegment& s = part_.segment(u);
  const ParamUnit& unit = model_.layout().units()[u];
  cast(unit.begin, s.global_begin);  // the slices before this rank's
  cast(s.global_end, unit.begin + unit.numel());
}

void DataParallel::skip_step() {
  // In place of the optimizer step: charged to it.
  const kernels::Ops o = ops(opt_.profile);
  if (model_.grads().numel() > 0)
    o.fill(model_.grads().f32(), 0.0f, model_.grads().numel(), Op::Optimizer);
  if (grad_shard_.numel() > 0) o.fill(grad_shard_.f32(), 0.0f, grad_shard_.numel(), Op::Optimizer);
}

void DataParallel::end_step() {
  if (stage_ >= 3)
    for (size_t u : root_units_) release_unit(u);
}

MemoryBytes DataParallel::memory() const {
  MemoryBytes b;
  // fp32 parameters plus, under --bf16 / --fp16, their 16-bit working copy
  // (stage 3: this rank's shard of it; the gathered units are transient,
  // like the fp32 gathers).
  b.params = stage_ >= 3 ? double(param_shard_.nbytes()) + double(lowp_shard_.size()) * 2.0
                         : double(model_.params().nbytes()) + double(model_.working_copy_bytes());
  b.grads = double(stage_ >= 2 ? grad_shard_.nbytes() : model_.grads().nbytes()) +
            split_backward_grad_bytes(double(model_.layout().numel()), kFp32AdamBytes, stage_,
                                      opt_.split_backward);  // held through the backward
  b.optimizer = double(optim_->state_bytes());
  return b;
}

}  // namespace tessera
