#include "tessera/plan/study.h"

#include <fmt/format.h>

#include <cmath>

#include "tessera/model/flops.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/study_data.h"

namespace tessera::plan {

namespace {

// The study's settings for every run: ZeRO-1, full recomputation, flash
// attention, fp16 mixed precision, Megatron-DeepSpeed's 1F1B pipeline.
PlanLayout study_layout(int64_t tp, int64_t pp, int64_t dp, int64_t global_batch) {
  PlanLayout L;
  L.par.tp = tp;
  L.par.pp = pp;
  L.par.dp = dp;
  L.par.micro_batch = 1;
  L.par.global_batch = global_batch;
  L.par.zero_stage = 1;
  L.par.recompute = Recompute::Full;
  L.par.schedule = ScheduleKind::OneFOneB;
  L.precision = Precision::Fp16;
  L.flash_attention = true;
  return L;
}

double err_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

}  // namespace

std::vector<ScalingCurve> study_scaling(const SystemSpec& sys) {
  const StudyData study = load_study();
  const auto& series = study.scaling;
  std::vector<ScalingCurve> out;
  for (const auto& s : series) {
    GPTConfig m = load_model(s.model);
    ScalingCurve c{s.model, s.weak, s.tp, s.pp, s.batch, {}, {}, s.study_efficiency};
    double base = 0;
    for (int64_t dp : s.dps) {
      const int64_t gbs = s.weak ? s.batch * dp : s.batch;
      LayoutCost lc = evaluate_layout(m, sys, study_layout(s.tp, s.pp, dp, gbs));
      const double per_gcd = lc.tokens_per_second / double(lc.layout.devices());
      if (base == 0) base = per_gcd;
      c.devices.push_back(lc.layout.devices());
      c.efficiency.push_back(per_gcd / base);
    }
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

// 1. The published layouts' throughput beside the planner's, and which
// reading of "% of peak" the measured run supports.
std::string study_throughput(const SystemSpec& sys, const StudyData& st) {
  const double peak_gcd = sys.peak_flops(Precision::Fp16);
  std::string out =
      fmt::format(fmt::runtime(st.text.throughput_intro), st.peak_tflops_a, st.peak_tflops_b);
  out += fmt::format("   {:<14} {:<22} {:>5} {:>8} {:>7} {:>7} {:>8} {:>8} {:>7} {:>8} {:>8}\n", "model",
                     "layout", "GCDs", "step s", "MFU", "HFU", "model TF", "hw TF", "study", "A TF",
                     "B TF");
  double sum_a = 0, sum_b = 0;
  for (const auto& r : st.published) {
    GPTConfig m = load_model(r.model);
    PlanLayout L = study_layout(r.tp, r.pp, r.dp, r.global_batch);
    LayoutCost c = evaluate_layout(m, sys, L);
    const double hw_tf = c.hfu * peak_gcd / 1e12, model_tf = c.mfu * peak_gcd / 1e12;
    const double a_tf = r.percent_of_peak / 100 * st.peak_tflops_a;
    const double b_tf = r.percent_of_peak / 100 * st.peak_tflops_b;
    sum_a += std::abs(std::log(hw_tf / a_tf));
    sum_b += std::abs(std::log(hw_tf / b_tf));
    out += fmt::format("   {:<14} tp {} pp {:>3} dp {} gbs {:<5} {:>5} {:>8.2f} {:>6.1f}% {:>6.1f}% {:>8.1f} {:>8.1f} {:>6.2f}% {:>8.1f} {:>8.1f}\n",
                       r.model, r.tp, r.pp, r.dp, r.global_batch, L.devices(), c.time.step, 100 * c.mfu,
                       100 * c.hfu, model_tf, hw_tf, r.percent_of_peak, a_tf, b_tf);
    out += fmt::format("   {:<14} planner HFU vs study: {:+.1f} points{}; limited by {}\n", "",
                       100 * c.hfu - r.percent_of_peak, c.fits ? "" : " (DOES NOT FIT: " + c.why_not + ")",
                       c.limiter);
  }
  // The measured run pins the reading down: its hardware FLOP/s per GCD
  // over the GCD's peak.
  const MeasuredRun& mr = st.measured;
  GPTConfig m = load_model(mr.layout.model);
  // Over the GCD's peak (reading A's), whatever system is being planned: the
  // log's run was on MI250X GCDs.
  const double measured_hfu = step_flops(m, mr.layout.global_batch, Recompute::Full).hardware /
                              mr.step_seconds / double(mr.gcds) / (st.peak_tflops_a * 1e12);
  const PlanLayout L = study_layout(mr.layout.tp, mr.layout.pp, mr.layout.dp, mr.layout.global_batch);
  // The published 175B figure under each reading, beside the best GEMM one
  // GCD reaches at all (a cited microbenchmark, [evidence]): a whole step
  // with recompute, communication and the bubble cannot run faster.
  const double published = st.published.size() > 1 ? st.published[1].percent_of_peak : 0;
  const double best = st.evidence.gemm_best_tflops;
  const double as_a = published / 100 * st.peak_tflops_a, as_b = published / 100 * st.peak_tflops_b;
  out += fmt::format(
      fmt::runtime(st.text.reading), best, st.evidence.gemm_source, published, as_b,
      100 * as_b / best, as_a, 100 * as_a / best, mr.step_seconds, 100 * measured_hfu,
      100 * best / st.peak_tflops_a, 50 * measured_hfu, sum_a / double(st.published.size()),
      sum_b / double(st.published.size()), 100 * sys.gemm_max_efficiency,
      err_pct(evaluate_layout(m, sys, L).time.step, mr.step_seconds));
  return out;
}

// 2. The measured run from the authors' log: time and memory.
std::string study_measured_run(const SystemSpec& sys, const StudyData& st) {
  const MeasuredRun& mr = st.measured;
  GPTConfig m = load_model(mr.layout.model);
  LayoutCost c = evaluate_layout(
      m, sys, study_layout(mr.layout.tp, mr.layout.pp, mr.layout.dp, mr.layout.global_batch));
  const StageCost& s0 = c.stages.front();
  const StageCost& s1 = c.stages[1];
  const double state_gb = s1.state.total() / 1e9;
  std::string out = fmt::format(fmt::runtime(st.text.measured_intro), mr.gcds,
      mr.layout.tp, mr.layout.pp, mr.layout.dp, mr.layout.global_batch, m.seq_length);
  out += fmt::format("   step time          study {:5.1f} s    planner {:7.1f} s   ({:+.0f}%)\n",
                     mr.step_seconds, c.time.step, err_pct(c.time.step, mr.step_seconds));
  out += fmt::format(fmt::runtime(st.text.state_row),
                     mr.resident_state_gb, state_gb, err_pct(state_gb, mr.resident_state_gb),
                     s1.state.total() / double(s1.params), mr.bytes_per_param,
                     mr.bytes_per_param * double(s1.params) / 1e9);
  out += fmt::format("   peak, stage 0      study {:5.1f} GB   planner {:7.1f} GB  ({:+.0f}%)\n",
                     mr.stage0_peak_gb, s0.memory() / 1e9, err_pct(s0.memory() / 1e9, mr.stage0_peak_gb));
  const double slope = (c.stages[1].memory() - c.stages[c.stages.size() - 2].memory()) /
                       double(c.stages.size() - 3) / 1e9;
  out += fmt::format(fmt::runtime(st.text.drop_row), mr.drop_per_stage_gb, slope);
  return out;
}

// 3. The scaling series beside the study's efficiencies.
std::string study_scaling_text(const SystemSpec& sys, const StudyData& st) {
  std::string out = st.text.scaling_intro;
  for (const auto& s : study_scaling(sys)) {
    std::string line;
    for (size_t i = 0; i < s.devices.size(); ++i)
      line += fmt::format(" {}:{:.1f}%", s.devices[i], 100 * s.efficiency[i]);
    const double eff = s.efficiency.back();
    out += fmt::format("   {} {:<14} tp {} pp {:>3}, {} {:<5} from {:>4} GCDs:{}\n", s.weak ? "weak  " : "strong",
                       s.model, s.tp, s.pp, s.weak ? "batch/replica" : "global batch ", s.batch,
                       s.devices.front(), line);
    out += fmt::format("   {:>6} study {:.0f}% at the largest, planner {:.1f}% ({:+.1f} points)\n", "",
                       s.study_efficiency, 100 * eff, 100 * eff - s.study_efficiency);
  }
  out += st.text.scaling_outro;
  return out;
}

}  // namespace

std::string reproduce_study(const SystemSpec& sys) {
  const StudyData st = load_study();
  // The study trained in fp16: its peak, which the system file gives apart from bf16's.
  std::string out = fmt::format(fmt::runtime(st.text.header), sys.name, sys.source,
                                sys.device_name, sys.peak_flops(tessera::Precision::Fp16) / 1e12);
  out += study_throughput(sys, st);
  out += study_measured_run(sys, st);
  out += study_scaling_text(sys, st);
  return out;
}

}  // namespace tessera::plan
