#include "tessera/plan/study.h"

#include <fmt/format.h>

#include <cmath>

#include "tessera/model/flops.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"

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
  L.precision = Precision::Mixed16;
  L.flash_attention = true;
  return L;
}

double err_pct(double predicted, double measured) { return 100.0 * (predicted - measured) / measured; }

struct Published {
  const char* model;
  int64_t tp, pp, dp, global_batch;
  double percent_of_peak;
};

// Scaling runs: the study gives the efficiencies, not every batch size; the
// batch sizes below are ours (weak: a fixed batch per replica; strong: one
// fixed global batch) and are printed with the results.
struct ScalingSeries {
  const char* model;
  int64_t tp, pp;
  std::vector<int64_t> dps;
  int64_t batch;      // weak: per replica; strong: global
  bool weak;
  double study_efficiency;
};

}  // namespace

std::vector<ScalingCurve> study_scaling(const SystemSpec& sys) {
  const ScalingSeries series[] = {
      {"frontier-175b", 4, 16, {2, 4, 8, 16}, 640, true, 100},
      {"frontier-1t", 4, 128, {1, 2, 4, 6}, 1024, true, 100},
      {"frontier-175b", 4, 16, {2, 4, 8, 16}, 2560, false, 89},
      {"frontier-1t", 4, 128, {1, 2, 3, 6}, 3072, false, 87},
  };
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

std::string reproduce_study(const SystemSpec& sys) {
  std::string out;
  const double peak_gcd = sys.peak_flops_16;
  out += fmt::format(
      "Dash et al. 2024 (arXiv:2312.12705) on system '{}' ({}): {} with {:.1f} TFLOP/s fp16 peak.\n"
      "Every run: micro-batch 1, ZeRO-1, full recompute, flash attention, fp16, 1F1B.\n\n",
      sys.name, sys.source, sys.device_name, peak_gcd / 1e12);

  // ---- 1. GPU throughput of the published layouts --------------------------
  // 22B: TP 1, PP 8, DP 2, GBS 640. 175B: TP 4, PP 16 on the measured run's
  // 128 GCDs (DP 2, GBS 1280). 1T: TP 4, PP 128, GBS 1024 (DP 1, 512 GCDs).
  const Published runs[] = {{"frontier-22b", 1, 8, 2, 640, 38.38},
                            {"frontier-175b", 4, 16, 2, 1280, 36.14},
                            {"frontier-1t", 4, 128, 1, 1024, 31.96}};
  out += "1. GPU throughput (% of peak). The study does not say which peak; two readings of its\n"
         "   figure in TFLOP/s per GCD: A = x% of the GCD's 191.5, B = x% of the MI250X's 383.\n";
  out += fmt::format("   {:<14} {:<22} {:>5} {:>8} {:>7} {:>7} {:>8} {:>8} {:>7} {:>8} {:>8}\n", "model",
                     "layout", "GCDs", "step s", "MFU", "HFU", "model TF", "hw TF", "study", "A TF",
                     "B TF");
  double sum_a = 0, sum_b = 0;
  for (const auto& r : runs) {
    GPTConfig m = load_model(r.model);
    PlanLayout L = study_layout(r.tp, r.pp, r.dp, r.global_batch);
    LayoutCost c = evaluate_layout(m, sys, L);
    const double hw_tf = c.hfu * peak_gcd / 1e12, model_tf = c.mfu * peak_gcd / 1e12;
    const double a_tf = r.percent_of_peak / 100 * 191.5, b_tf = r.percent_of_peak / 100 * 383.0;
    sum_a += std::abs(std::log(hw_tf / a_tf));
    sum_b += std::abs(std::log(hw_tf / b_tf));
    out += fmt::format("   {:<14} tp {} pp {:>3} dp {} gbs {:<5} {:>5} {:>8.2f} {:>6.1f}% {:>6.1f}% {:>8.1f} {:>8.1f} {:>6.2f}% {:>8.1f} {:>8.1f}\n",
                       r.model, r.tp, r.pp, r.dp, r.global_batch, L.devices(), c.time.step, 100 * c.mfu,
                       100 * c.hfu, model_tf, hw_tf, r.percent_of_peak, a_tf, b_tf);
    out += fmt::format("   {:<14} planner HFU vs study: {:+.1f} points{}; limited by {}\n", "",
                       100 * c.hfu - r.percent_of_peak, c.fits ? "" : " (DOES NOT FIT: " + c.why_not + ")",
                       c.limiter);
  }
  // The measured run (175B, 128 GCDs, GBS 1280, 196.5 s) pins the reading
  // down: its hardware FLOP/s per GCD over the GCD's peak.
  {
    GPTConfig m = load_model("frontier-175b");
    const double measured_hfu = step_flops(m, 1280, Recompute::Full).hardware / 196.5 / 128 / peak_gcd;
    out += fmt::format(
        "   The authors' measured 175B run (196.5 s/step) reaches {:.0f}% of a GCD's peak in hardware FLOPs\n"
        "   (Megatron-DeepSpeed counts recompute), which is {:.0f}% of an MI250X's: the study's {:.2f}% matches\n"
        "   the latter, so the log supports reading B (per-GCD throughput over the MI250X's 383 TFLOP/s).\n"
        "   The planner's hardware TFLOP/s, from the GEMM efficiency in the system file, lie between the\n"
        "   two readings (mean |log ratio| {:.2f} to A, {:.2f} to B): it predicts the measured run {:+.0f}%\n"
        "   (see 2.). The log's {:.0f}% of GCD peak over a whole step would need the GEMMs above that even with\n"
        "   every transfer hidden; the planner assumes at most {:.0f}% (system file) and exposed TP all-reduces,\n"
        "   so either the quoted step time/batch is not the run's or MI250X's GEMMs ran faster than assumed.\n\n",
        100 * measured_hfu, 50 * measured_hfu, 36.14, sum_a / 3, sum_b / 3,
        err_pct(evaluate_layout(m, sys, study_layout(4, 16, 2, 1280)).time.step, 196.5),
        100 * measured_hfu, 100 * sys.gemm_max_efficiency);
  }

  // ---- 2. The measured run from the authors' log ---------------------------
  {
    GPTConfig m = load_model("frontier-175b");
    LayoutCost c = evaluate_layout(m, sys, study_layout(4, 16, 2, 1280));
    const StageCost& s0 = c.stages.front();
    const StageCost& s1 = c.stages[1];
    const double state_gb = s1.state.total() / 1e9;
    out += "2. Measured run, 175B on 128 GCDs (tp 4 pp 16 dp 2, gbs 1280, seq 2048):\n";
    out += fmt::format("   step time          study 196.5 s    planner {:7.1f} s   ({:+.0f}%)\n", c.time.step,
                       err_pct(c.time.step, 196.5));
    out += fmt::format("   resident state     study  23.4 GB   planner {:7.1f} GB  ({:+.0f}%; {:.1f} bytes/param: "
                       "2 + 2 + 12/dp; the study's 9 bytes/param implies {:.1f} GB)\n",
                       state_gb, err_pct(state_gb, 23.4),
                       s1.state.total() / double(s1.params), 9.0 * double(s1.params) / 1e9);
    out += fmt::format("   peak, stage 0      study  33.9 GB   planner {:7.1f} GB  ({:+.0f}%)\n", s0.memory() / 1e9,
                       err_pct(s0.memory() / 1e9, 33.9));
    const double slope = (c.stages[1].memory() - c.stages[c.stages.size() - 2].memory()) /
                         double(c.stages.size() - 3) / 1e9;
    out += fmt::format("   drop per stage     study   0.3 GB   planner {:7.2f} GB  (one fewer micro-batch's "
                       "layer inputs held per stage under 1F1B)\n\n",
                       slope);
  }

  // ---- 3. Scaling -----------------------------------------------------------
  out += "3. Scaling efficiency (throughput per GCD relative to the first point; batch sizes are\n"
         "   the planner's choice, the study does not publish them all):\n";
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
  out += "\n   Weak scaling keeps the work per replica fixed, so only the data-parallel reduction grows\n"
         "   (hidden behind the last backward): ~100% as in the study. Strong scaling loses to the\n"
         "   pipeline bubble, (p-1)/m with fewer micro-batches per replica as dp grows.\n";
  return out;
}

}  // namespace tessera::plan
