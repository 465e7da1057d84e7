#include "tessera/plan/by_op_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "tessera/plan/comm_model.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layer_ops.h"

namespace tessera::plan {

namespace {

// Seconds of one micro-batch's collectives of `kind` in `list`.
double collective_seconds(const std::vector<OpEntry>& list, CommOp kind,
                          const SystemSpec& sys, const PlanLayout& L) {
  double s = 0;
  for (const OpEntry& e : list)
    if (e.cls == OpClass::Collective && e.collective == kind) s += op_seconds(e, sys, L);
  return s;
}

}  // namespace

ByOpReport by_op(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& c) {
  const PlanLayout& L = c.layout;
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages, mb = L.micro_batches();
  const double chunks_run = double(mb * v);  // micro-batch chunks a rank runs per step
  const OpList ol = op_list(op_list_config(m, L));
  const StepBreakdown& b = c.time;
  ByOpReport r;
  for (const StageCost& sc : c.stages) {
    StageByOp s;
    s.stage = sc.stage;
    const Profile& o = sc.ops;
    s.gemm = o[Op::Gemm];
    s.attention = o[Op::Attention];
    for (Op k : {Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding, Op::Loss, Op::Dropout,
                 Op::Cast})
      s.memory_bound += o[k];
    const double layers_per_chunk = double(par.chunk_layer_count(m.num_layers, sc.stage));
    auto kind = [&](CommOp k) {
      double t = chunks_run * layers_per_chunk * collective_seconds(ol.layer, k, sys, L);
      if (sc.stage == 0) t += double(mb) * collective_seconds(ol.embed, k, sys, L);
      if (sc.stage == chunk_rank(p, p * v - 1, par.placement()))  // the head's
        t += double(mb) * collective_seconds(ol.head, k, sys, L);
      return t;
    };
    s.tp_all_reduce = kind(CommOp::AllReduce);
    s.tp_all_gather = kind(CommOp::AllGather);
    s.tp_reduce_scatter = kind(CommOp::ReduceScatter);
    s.zero3_gather = b.zero3_gather;
    const double busy = s.gemm + s.attention + s.memory_bound + s.tp_all_reduce +
                        s.tp_all_gather + s.tp_reduce_scatter + s.zero3_gather;
    s.bubble = std::max(0.0, b.pipeline - busy);
    s.dp_exposed = b.dp_exposed;
    s.sync_wait = b.sync_wait;
    if (p > 1 && (sc.stage == 0 || sc.stage == p - 1)) s.embedding_sync = b.embedding_sync;
    s.optimizer = o[Op::Optimizer] + o[Op::GradNorm];
    s.core_sharing = b.core_sharing;
    s.step = b.step;
    const double accounted = busy + s.bubble + s.dp_exposed + s.sync_wait + s.embedding_sync +
                             s.optimizer + s.core_sharing;
    s.idle_after = std::max(0.0, b.step - accounted);
    r.stages.push_back(s);
  }
  const double devices = double(L.devices());
  r.model_tflops = c.model_flops / b.step / devices / 1e12;
  r.hardware_tflops = c.hardware_flops / b.step / devices / 1e12;
  r.mfu = c.mfu;
  r.hfu = c.hfu;
  return r;
}

std::string format_by_op(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& c) {
  const ByOpReport r = by_op(m, sys, c);
  std::string out = fmt::format("by op, seconds of one step per rank of each stage:\n  {}\n",
                                c.layout.str());
  // At most 6 stage columns per block, so a line stays within 100 columns.
  constexpr size_t kColumns = 6;
  for (size_t first = 0; first < r.stages.size(); first += kColumns) {
    const size_t last = std::min(r.stages.size(), first + kColumns);
    out += fmt::format("{:<20}", "");
    for (size_t i = first; i < last; ++i)
      out += fmt::format("{:>12}", fmt::format("stage {}", r.stages[i].stage));
    out += "\n";
    auto row = [&](const char* name, double StageByOp::*field) {
      out += fmt::format("{:<20}", name);
      for (size_t i = first; i < last; ++i) out += fmt::format("{:>12.4f}", r.stages[i].*field);
      out += "\n";
    };
    row("gemm", &StageByOp::gemm);
    row("attention", &StageByOp::attention);
    row("memory-bound", &StageByOp::memory_bound);
    if (c.layout.par.tp > 1) {
      row("tp all-reduce", &StageByOp::tp_all_reduce);
      if (c.layout.par.sequence_parallel) {
        row("tp all-gather", &StageByOp::tp_all_gather);
        row("tp reduce-scatter", &StageByOp::tp_reduce_scatter);
      }
    }
    if (c.layout.par.zero_stage == 3 && c.layout.par.dp > 1)
      row("zero-3 gathers", &StageByOp::zero3_gather);
    if (c.layout.par.pp > 1) row("pipeline bubble", &StageByOp::bubble);
    if (c.layout.par.dp > 1) row("exposed dp", &StageByOp::dp_exposed);
    if (c.layout.par.pp > 1) row("embedding sync", &StageByOp::embedding_sync);
    row("sync wait", &StageByOp::sync_wait);
    row("optimizer", &StageByOp::optimizer);
    if (c.time.core_sharing > 0) row("core sharing", &StageByOp::core_sharing);
    row("idle (other stages)", &StageByOp::idle_after);
    row("step", &StageByOp::step);
  }
  out += fmt::format(
      "model {:.1f} TFLOP/s per device, hardware {:.1f} (with recomputation)\n"
      "MFU {:.1f}%, HFU {:.1f}% of the {:.0f} TFLOP/s peak\n",
      r.model_tflops, r.hardware_tflops, 100 * r.mfu, 100 * r.hfu,
      sys.peak_flops(c.layout.precision) / 1e12);
  return out;
}

}  // namespace tessera::plan
