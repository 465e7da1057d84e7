#include "tessera/plan/report.h"

#include <fmt/format.h>

namespace tessera::plan {

namespace {
double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }
}  // namespace

namespace {

std::string short_rc(Recompute r) {
  const std::string n = recompute_name(r);
  return n == "selective" ? std::string("sel") : n;
}
std::string short_sched(ScheduleKind k) {
  const std::string n = schedule_kind_name(k);
  return n == "interleaved" ? std::string("inter") : n;
}

// The table's columns, at most 100 characters: the layout as separate
// aligned columns (tp, pp, dp, micro-batch, virtual stages, ZeRO stage,
// recompute, sequence parallel, schedule) so that rows line up, then the
// prediction; the last three (bubble, tp and dp shares of the step) become
// how far over memory a layout is in a table of those that do not fit.
constexpr const char* kRow =
    "{:>3} {:>3} {:>4} {:>5} {:>3} {:>2} {:>1} {:<4} {:<2} {:<5} {:>9} {:>8} {:>5} {:>6} {}\n";

// An uneven pipeline split: the flags that give it, for the footnote under
// a table whose pp column marks the row with '*'.
std::string split_flags(const ParallelConfig& p) {
  std::string s;
  if (p.first_stage_layers) s += fmt::format(" --decoder-first-pipeline-num-layers {}", *p.first_stage_layers);
  if (p.last_stage_layers) s += fmt::format(" --decoder-last-pipeline-num-layers {}", *p.last_stage_layers);
  return s;
}

std::string split_footnotes(const std::vector<LayoutCost>& costs, size_t top_k) {
  std::string out;
  bool cp = false;
  for (size_t i = 0; i < costs.size() && i < top_k; ++i) {
    if (costs[i].layout.par.uneven_stages())
      out += fmt::format("  * #{} uneven stages:{}\n", i + 1, split_flags(costs[i].layout.par));
    cp = cp || costs[i].layout.par.cp > 1 || costs[i].layout.par.ep > 1;
  }
  if (cp)
    out += "  tp column \"TcC\" / \"TeE\": tp T with context parallelism C "
           "(--context-parallel-size) / expert parallelism E\n";
  return out;
}

// The tp column: "4", or with context parallelism "4c2" (tp 4, cp 2), with
// expert parallelism "1e8" (tp 1, ep 8).
std::string tp_text(const ParallelConfig& p) {
  return fmt::format("{}{}{}", p.tp, p.cp > 1 ? fmt::format("c{}", p.cp) : "",
                     p.ep > 1 ? fmt::format("e{}", p.ep) : "");
}

std::string row(const std::string& rank, const LayoutCost& c, const std::string& tail) {
  const ParallelConfig& p = c.layout.par;
  const std::string pp = fmt::format("{}{}", p.pp, p.uneven_stages() ? "*" : "");
  return fmt::format(kRow, rank, tp_text(p), pp, p.dp, p.micro_batch, p.virtual_stages, p.zero_stage,
                     short_rc(p.recompute), p.sequence_parallel ? "sp" : "-",
                     short_sched(p.schedule), fmt::format("{:.0f}", c.tokens_per_second),
                     // Milliseconds resolve a small model's step; a huge
                     // one (a layout far over memory) keeps the column width.
                     c.time.step < 1e4 ? fmt::format("{:.3f}", c.time.step)
                                       : fmt::format("{:.0f}", c.time.step),
                     fmt::format("{:.1f}", 100 * c.mfu),
                     fmt::format("{:.1f}", c.peak_memory / 1e9), tail);
}

}  // namespace

std::string over_memory_text(const LayoutCost& c) {
  if (c.fits) return "";
  // GB to one decimal, or MB / kB when that would read "+0.0 GB".
  const double b = c.over_memory;
  if (b >= 0.05e9) return fmt::format("+{:.1f} GB over", b / 1e9);
  if (b >= 0.05e6) return fmt::format("+{:.1f} MB over", b / 1e6);
  return fmt::format("+{:.1f} kB over", b / 1e3);
}

std::string format_table(const std::vector<LayoutCost>& costs, size_t top_k) {
  const std::string shares = fmt::format("{:>5} {:>5} {:>5}", "bub%", "tp%", "dp%");
  std::string out = fmt::format(kRow, "#", "tp", "pp", "dp", "mb", "v", "z", "rc", "sp", "sched",
                                "tokens/s", "step s", "MFU%", "mem GB", shares);
  for (size_t i = 0; i < costs.size() && i < top_k; ++i) {
    const LayoutCost& c = costs[i];
    const StepBreakdown& t = c.time;
    const std::string tail =
        c.fits ? fmt::format("{:>5.1f} {:>5.1f} {:>5.1f}", pct(t.bubble, t.step),
                             pct(t.tp_comm, t.step), pct(t.dp_exposed, t.step))
               : over_memory_text(c);
    out += row(std::to_string(i + 1), c, tail);
  }
  return out + split_footnotes(costs, top_k);
}

std::string format_miss_table(const std::vector<LayoutCost>& costs, size_t top_k) {
  std::string out = fmt::format(kRow, "#", "tp", "pp", "dp", "mb", "v", "z", "rc", "sp", "sched",
                                "tokens/s", "step s", "MFU%", "mem GB", "over memory");
  for (size_t i = 0; i < costs.size() && i < top_k; ++i)
    out += row(std::to_string(i + 1), costs[i], over_memory_text(costs[i]));
  return out + split_footnotes(costs, top_k);
}

std::string calibration_mismatch(const SystemSpec& sys, int64_t ranks, int64_t threads) {
  if (sys.calibrated_ranks <= 0 || sys.calibrated_threads <= 0 || threads <= 0) return "";
  if (sys.calibrated_ranks == ranks && sys.calibrated_threads == threads) return "";
  return fmt::format(
      "system '{}' was calibrated with {} rank(s) x {} thread(s), this run has {} x {}\n"
      "  (its numbers hold for the contention it measured; calibrate again with\n"
      "  scripts/mpirun.sh -n {} build/tessera calibrate --threads {})",
      sys.name, sys.calibrated_ranks, sys.calibrated_threads, ranks, threads, ranks, threads);
}

std::string foreign_calibration(const SystemSpec& sys, const std::string& this_cpu) {
  if (sys.calibrated_ranks <= 0 || sys.device_name == this_cpu) return "";
  return fmt::format(
      "system '{}' was calibrated on another CPU: {}\n"
      "  this machine's: {} (the file's numbers describe the other; measure\n"
      "  this one with scripts/mpirun.sh -n RANKS build/tessera calibrate --threads THREADS)",
      sys.name, sys.device_name, this_cpu);
}

std::string shared_core_calibration(const SystemSpec& sys) {
  if (!sys.kernels_include_sharing()) return "";
  const int64_t threads = std::max<int64_t>(1, sys.calibrated_threads);
  return fmt::format(
      "system '{}' was calibrated by {} rank(s) x {} thread(s) on {} core(s), every rank\n"
      "  measuring its kernels at once: their times hold a share of the cores' sharing,\n"
      "  which the planner adds per layout again, so steps are planned long (calibrate\n"
      "  again: scripts/mpirun.sh -n {} build/tessera calibrate --threads {})",
      sys.name, sys.calibrated_ranks, threads, sys.cores, sys.calibrated_ranks, threads);
}

std::vector<std::string> calibration_file_warnings(const SystemSpec& sys,
                                                   const std::string& this_cpu) {
  std::vector<std::string> out;
  for (std::string w : {foreign_calibration(sys, this_cpu), shared_core_calibration(sys)})
    if (!w.empty()) out.push_back(std::move(w));
  return out;
}

std::string format_breakdown(const LayoutCost& c, const SystemSpec& sys) {
  const StepBreakdown& t = c.time;
  // The layout and the machine on one line unless that passes 100 columns
  // after the caller's "best: " (a long layout: uneven stages, fp8).
  std::string out = fmt::format("{} on {} x {}", c.layout.str(), c.layout.devices(), sys.device_name);
  if (out.size() > 92)
    out = fmt::format("{}\n  on {} x {}", c.layout.str(), c.layout.devices(), sys.device_name);
  out += "\n";
  out += fmt::format("  step {:.3f} s ({}), {:.0f} tokens/s, MFU {:.1f}% (HFU {:.1f}%), {:.1f} TFLOP/s/device\n",
                     t.step, t.simulated ? "schedule simulated" : "closed form", c.tokens_per_second,
                     100 * c.mfu, 100 * c.hfu, c.tflops_per_device);
  out += fmt::format("  time: compute {:.3f} s ({:.1f}%), tp comm {:.3f} s ({:.1f}%), bubble {:.3f} s "
                     "({:.1f}%, fraction {:.3f}),\n        dp exposed {:.3f} of {:.3f} s, embedding "
                     "sync {:.4f} s, optimizer {:.4f} s\n",
                     t.compute, pct(t.compute, t.step), t.tp_comm, pct(t.tp_comm, t.step), t.bubble,
                     pct(t.bubble, t.step), t.bubble_fraction, t.dp_exposed, t.dp_reduce,
                     t.embedding_sync, t.optimizer);
  // The terms only some layouts have, on a line of their own (100 columns).
  std::string more;
  if (t.zero3_gather > 0) more += fmt::format(", zero-3 gathers {:.3f} s", t.zero3_gather);
  if (c.layout.par.cp > 1)
    more += fmt::format(", cp {} K/V exchange exposed {:.3f} s ({})", c.layout.par.cp, t.cp_comm,
                        cp_comm_name(c.layout.par.cp_comm));
  if (t.sync_wait > 0) more += fmt::format(", sync waits {:.3f} s", t.sync_wait);
  if (t.core_sharing > 0) more += fmt::format(", core sharing {:.3f} s (ranks > cores)", t.core_sharing);
  if (t.straggler > 0) more += fmt::format(", slowest device {:.3f} s", t.straggler);
  if (!more.empty()) out += "        " + more.substr(2) + "\n";
  out += "  memory per stage (GB): stage: weights + grads + optimizer + activations = total (in flight)\n";
  const size_t n = c.stages.size();
  for (size_t i = 0; i < n; ++i) {
    // Long pipelines: the first three, the last two.
    if (n > 6 && i == 3) out += fmt::format("    ... {} stages ...\n", n - 5);
    if (n > 6 && i >= 3 && i < n - 2) continue;
    const StageCost& s = c.stages[i];
    out += fmt::format("    {:>3}: {:.2f} + {:.2f} + {:.2f} + {:.2f}{} = {:.2f} ({} chunks)\n", s.stage,
                       s.state.params / 1e9, s.state.grads / 1e9, s.state.optimizer / 1e9,
                       s.activations / 1e9,
                       s.zero3_buffers > 0 ? fmt::format(" + {:.2f}", s.zero3_buffers / 1e9) : "",
                       s.memory() / 1e9, s.in_flight);
  }
  out += fmt::format("  limited by: {}\n", c.limiter);
  return out;
}

nlohmann::json layout_json(const LayoutCost& c) {
  const auto& L = c.layout;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : c.stages)
    stages.push_back({{"stage", s.stage}, {"params", s.params}, {"weights_bytes", s.state.params},
                      {"grads_bytes", s.state.grads}, {"optimizer_bytes", s.state.optimizer},
                      {"activation_bytes", s.activations}, {"zero3_buffer_bytes", s.zero3_buffers},
                      {"in_flight_chunks", s.in_flight}, {"total_bytes", s.memory()}});
  const auto& t = c.time;
  return {{"layout",
           {{"tp", L.par.tp}, {"pp", L.par.pp}, {"dp", L.par.dp}, {"cp", L.par.cp}, {"ep", L.par.ep},
            {"cp_comm", cp_comm_name(L.par.cp_comm)}, {"virtual_stages", L.par.virtual_stages},
            {"micro_batch", L.par.micro_batch}, {"global_batch", L.par.global_batch},
            {"zero_stage", L.par.zero_stage}, {"recompute", recompute_name(L.par.recompute)},
            {"sequence_parallel", L.par.sequence_parallel}, {"schedule", schedule_kind_name(L.par.schedule)},
            {"precision", precision_name(L.precision)}, {"flash_attention", L.flash_attention},
            // 0: even (the flag not given)
            {"decoder_first_pipeline_num_layers", L.par.first_stage_layers.value_or(0)},
            {"decoder_last_pipeline_num_layers", L.par.last_stage_layers.value_or(0)}}},
          {"fits", c.fits},
          {"over_memory_bytes", c.over_memory},
          {"why_not", c.why_not},
          {"step_seconds", t.step},
          {"tokens_per_second", c.tokens_per_second},
          {"mfu", c.mfu},
          {"hfu", c.hfu},
          {"tflops_per_device", c.tflops_per_device},
          {"peak_memory_bytes", c.peak_memory},
          {"peak_stage", c.peak_stage},
          {"time",
           {{"pipeline", t.pipeline}, {"compute", t.compute}, {"tp_comm", t.tp_comm},
            {"bubble", t.bubble}, {"bubble_fraction", t.bubble_fraction}, {"p2p", t.p2p},
            {"dp_reduce", t.dp_reduce}, {"dp_exposed", t.dp_exposed},
            {"embedding_sync", t.embedding_sync}, {"optimizer", t.optimizer},
            {"zero3_gather", t.zero3_gather}, {"cp_comm", t.cp_comm}, {"sync_wait", t.sync_wait},
            {"core_sharing", t.core_sharing}, {"straggler", t.straggler},
            {"schedule_simulated", t.simulated}}},
          {"stages", stages},
          {"limiter", c.limiter}};
}

nlohmann::json search_json(const SearchResult& r, size_t top_k) {
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < r.ranked.size() && i < top_k; ++i) top.push_back(layout_json(r.ranked[i]));
  nlohmann::json misses = nlohmann::json::array();
  for (const auto& c : r.closest_misses) misses.push_back(layout_json(c));
  return {{"candidates", r.candidates}, {"fit", r.ranked.size()}, {"too_big", r.too_big},
          {"search_seconds", r.seconds}, {"top", top}, {"closest_misses", misses}};
}

}  // namespace tessera::plan
