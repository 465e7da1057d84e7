#include "tessera/plan/calibrate_run.h"

#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include <unistd.h>

#include "tessera/comm/communicator.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/model/op_list.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

std::vector<CalibShape> training_gemm_shapes(const GPTConfig& m, int64_t micro_batch,
                                             int64_t tp) {
  OpListConfig c;
  c.model = m;
  c.micro_batch = micro_batch;
  c.tp = tp;
  const OpList ol = op_list(c);
  // (linears, 3): forward, input gradient, weight gradient of each linear,
  // the linears in the order forward first runs them.
  std::vector<std::array<CalibShape, 3>> linears;
  std::map<std::string_view, size_t> index;  // a linear's weight name -> its row
  for (const auto* part : {&ol.embed, &ol.layer, &ol.head})
    for (const OpEntry& e : *part) {
      if (e.cls != OpClass::Gemm || e.batch != 1) continue;
      const auto [it, added] = index.emplace(e.what, linears.size());
      if (added) linears.emplace_back();
      std::array<CalibShape, 3>& roles = linears[it->second];
      const std::string_view k = e.kernel;
      if (k == "matmul_forward")
        roles[0] = {e.m, e.n, e.k, 'N', 'T', e.m, e.n, e.k};
      else if (k == "matmul_backward.dinp")
        roles[1] = {e.m, e.n, e.k, 'N', 'N', e.m, e.n, e.k};
      else if (k == "matmul_backward.dweight")
        // dW (OC, C) = dY^T X: the sgemm OC x C x rows, which the planner
        // names (C, OC, rows) (layer_ops.cpp looks it up so).
        roles[2] = {e.n, e.m, e.k, 'T', 'N', e.m, e.n, e.k};
    }
  std::vector<CalibShape> out;
  for (const auto& roles : linears)
    for (const CalibShape& s : roles)
      if (s.m > 0) out.push_back(s);
  return out;
}

std::vector<CalibShape> calibration_shapes(const CalibrateOptions& o) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, CalibShape> unique;
  auto add = [&](const CalibShape& s) { unique.emplace(std::tuple{s.m, s.n, s.k}, s); };
  for (const auto& name : o.models) {
    const GPTConfig m = load_model(name);
    for (int64_t t : o.tp)
      if (m.num_heads % t == 0)
        for (int64_t mb : o.micro_batch)
          for (const auto& s : training_gemm_shapes(m, mb, t)) add(s);
  }
  if (!o.quick && o.grid)
    for (int64_t m : {128, 512, 2048, 8192})
      for (int64_t n : {256, 1024, 4096})
        for (int64_t k : {256, 1024, 4096})
          if (2.0 * double(m * n * k) <= o.max_gflop * 1e9) add({m, n, k, 'N', 'T', m, n, k});
  std::vector<CalibShape> out;
  for (auto& [key, s] : unique) out.push_back(s);
  return out;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "CPU";
}

double machine_memory_bytes() {
  double bytes = 0;
  std::ifstream mi("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (mi >> key >> kb)
    if (key == "MemTotal:") bytes = kb * 1024;
  std::ifstream cg("/sys/fs/cgroup/memory.max");
  std::string lim;
  if (cg >> lim && lim != "max") bytes = std::min(bytes, std::stod(lim));
  return bytes;
}

namespace {

constexpr std::array<Precision, 2> kLowp{Precision::Bf16, Precision::Fp16};
// Timed runs of each in-situ step per pass (after one warm-up), pooled over the passes.
constexpr int kStepReps = 3;

// Each rank's own measurement, averaged over the ranks (they ran at once).
double rank_mean(comm::Communicator& world, double x) {
  return double(world.all_reduce_scalar(float(x))) / world.size();
}

// Every pass's numbers, one entry per pass; medians are taken at the end.
struct PassSamples {
  std::vector<std::vector<double>> gemm_flops;  // (shapes, passes)
  // The 16-bit GEMMs, kLowp[i]'s at [i]: (shapes, passes) each; empty: not measured.
  std::array<std::vector<std::vector<double>>, 2> gemm_lowp_flops;
  std::vector<double> att_forward, att_backward;  // (passes,)
  std::map<std::string, std::vector<double>> kernels;  // (passes,) per Backend call
  // In-situ steps by micro-batch, every timed run of every pass pooled
  // (passes x kStepReps,): one micro-batch's step is tens of milliseconds,
  // and a single run carries whatever burst the shared machine had then
  // (factors of 2 in one run, 1.0-1.2 in the median).
  std::map<int64_t, std::vector<Profile>> steps;  // the fp32 step
  // kLowp[i]'s step, where its GEMMs are measured.
  std::array<std::map<int64_t, std::vector<Profile>>, 2> lowp_steps;
  // The fp32 step again with dropout 0.1 at both sites, at the in-situ
  // micro-batch, for the dropout factor of a model that has none (a layout
  // may turn it on).
  std::vector<Profile> dropout_steps;
};

// Rank 0's progress lines while a pass measures: one as each part of the
// pass ends, and within the GEMMs one every kEvery seconds, so that a
// calibration (minutes) is never silent for long.
struct Progress {
  static constexpr double kEvery = 10;
  bool lead = false;
  std::string pass;         // "pass 2/5"
  const Stopwatch* total = nullptr;
  double last = 0;          // total->elapsed() at the last line
  void line(const std::string& what) {
    if (!lead) return;
    last = total->elapsed();
    fmt::print("    {}: {} ({:.0f} s so far)\n", pass, what, last);
    std::fflush(stdout);
  }
  bool due() const { return lead && total->elapsed() - last >= kEvery; }
};

// One pass: every GEMM shape, attention, the kernels and the in-situ step,
// each timed once. Float all-reduces carry ns and ms so that they keep their
// digits.
void measure_pass(comm::Communicator& world, const kernels::Backend& backend,
                  const std::vector<CalibShape>& shapes, const GPTConfig& m0, int64_t att_batch,
                  const std::vector<int64_t>& step_batches, double min_seconds, Calibration& c,
                  PassSamples& s, Progress& progress) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    world.barrier();
    s.gemm_flops[i].push_back(rank_mean(world, measure_gemm(backend, Precision::Fp32, shapes[i], min_seconds)));
    for (size_t l = 0; l < kLowp.size(); ++l) {
      if (s.gemm_lowp_flops[l].empty()) continue;
      world.barrier();
      s.gemm_lowp_flops[l][i].push_back(
          rank_mean(world, measure_gemm(backend, kLowp[l], shapes[i], min_seconds)));
    }
    if (progress.due() && i + 1 < shapes.size())
      progress.line(fmt::format("GEMM shape {}/{}", i + 1, shapes.size()));
  }
  progress.line(fmt::format("{} GEMM shapes measured", shapes.size()));
  world.barrier();
  const AttentionHeads heads{m0.num_heads, m0.kv_heads(), m0.head_size(),
                             m0.rope() ? m0.rotary_base : 0.0f};
  const AttentionTime at = measure_attention(backend, att_batch, m0.seq_length, heads);
  s.att_forward.push_back(rank_mean(world, at.forward));
  s.att_backward.push_back(rank_mean(world, at.backward));
  c.attention = at;
  progress.line("attention measured");
  world.barrier();
  KernelRates k = measure_kernel_rates(backend, m0, c.kernel_rows / m0.seq_length,
                                       ParamLayout::count_model_params(m0));
  k[std::string(kAttentionMaskDraw)] =
      measure_attention_mask(backend, att_batch, m0.seq_length, heads, min_seconds);
  // Every rank's table has the same names (the same step); the mean of each.
  for (const auto& [name, rate] : k)
    s.kernels[name].push_back(rank_mean(world, rate * 1e9) * 1e-9);
  progress.line("memory-bound kernels measured");
  world.barrier();
  // Every rank's runs, each the mean over the ranks, appended to `into`.
  auto steps_of = [&](const GPTConfig& m, int64_t mb, Precision p, std::vector<Profile>& into) {
    world.barrier();
    for (Profile step : measure_training_steps(m, mb, kStepReps, p)) {
      for (double& x : step.seconds) x = rank_mean(world, x * 1e3) * 1e-3;
      into.push_back(step);
    }
  };
  for (int64_t mb : step_batches) {
    steps_of(m0, mb, Precision::Fp32, s.steps[mb]);
    for (size_t l = 0; l < kLowp.size(); ++l)
      if (!s.gemm_lowp_flops[l].empty()) steps_of(m0, mb, kLowp[l], s.lowp_steps[l][mb]);
  }
  if (m0.attention_dropout == 0 && m0.hidden_dropout == 0) {
    GPTConfig dropping = m0;
    dropping.attention_dropout = dropping.hidden_dropout = 0.1f;
    steps_of(dropping, c.in_situ_batch, Precision::Fp32, s.dropout_steps);
  }
  progress.line("training steps measured");
}

// The medians over the passes into `c`; rank 0 prints each GEMM.
void take_medians(const std::vector<CalibShape>& shapes, const PassSamples& s, bool lead,
                  Calibration& c) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& sh = shapes[i];
    const double flops = upper_median(s.gemm_flops[i]);
    c.gemm.push_back({sh.m, sh.n, sh.k, flops});
    c.peak_gemm = std::max(c.peak_gemm, flops);
    std::string lowp;
    for (size_t l = 0; l < kLowp.size(); ++l) {
      if (s.gemm_lowp_flops[l].empty()) continue;
      const double f = upper_median(s.gemm_lowp_flops[l][i]);
      const bool bf16 = kLowp[l] == Precision::Bf16;
      (bf16 ? c.gemm_bf16 : c.gemm_fp16).push_back({sh.m, sh.n, sh.k, f});
      double& peak = bf16 ? c.peak_gemm_bf16 : c.peak_gemm_fp16;
      peak = std::max(peak, f);
      lowp += fmt::format(", {} {:7.1f}", precision_name(kLowp[l]), f / 1e9);
    }
    if (lead)
      fmt::print("  sgemm {}{} {:>5} x {:>5} x {:>5}  (plan m {} n {} k {}): {:7.1f} GFLOP/s{}\n",
                 sh.ta, sh.tb, sh.M, sh.N, sh.K, sh.m, sh.n, sh.k, flops / 1e9, lowp);
  }
  c.attention.forward = upper_median(s.att_forward);
  c.attention.backward = upper_median(s.att_backward);
  for (const auto& [name, rates] : s.kernels) c.kernels[name] = upper_median(rates);
}

void print_attention_and_kernels(const Calibration& c, int64_t att_batch, const GPTConfig& m0) {
  fmt::print("  attention (b {} s {} h {} heads {}): {:.3f} ms forward, {:.3f} ms backward "
             "(efficiency {:.3f} of peak in the planner's terms)\n",
             att_batch, m0.seq_length, m0.hidden_size, m0.num_heads, c.attention.forward * 1e3,
             c.attention.backward * 1e3, c.attention_efficiency);
  fmt::print("  kernels (ns per element, {} tokens):", c.kernel_rows);
  for (const auto& [name, rate] : c.kernels) fmt::print(" {} {:.3f}", name, rate * 1e9);
  fmt::print("\n");
}

void print_in_situ(const Calibration& c) {
  auto line = [&](Precision p, int64_t mb, const Profile& f) {
    fmt::print("  in situ ({} training step of micro-batch {} over the tables):",
               precision_name(p), mb);
    for (Op op : {Op::Gemm, Op::Attention, Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding,
                  Op::Loss, Op::Dropout, Op::Cast})
      if (f[op] != 1.0) fmt::print(" {} {:.2f}", op_name(op), f[op]);
    fmt::print("\n");
  };
  line(Precision::Fp32, c.in_situ_batch, c.in_situ);
  for (const auto& [p, f] : c.in_situ_lowp) line(p, c.in_situ_batch, f);
  for (const auto& [mb, at] : c.in_situ_at)
    for (const auto& [p, f] : at) line(p, mb, f);
}

// The GEMM tables, attention, the memory-bound kernels, the triad and the
// in-situ step, measured by the ranks of `ranks` at once.
void measure_compute(comm::Communicator& ranks, const CalibrateOptions& o,
                     const std::vector<CalibShape>& shapes, bool lead, const Stopwatch& total,
                     Calibration& c) {
  const kernels::Backend& backend = o.backend ? *o.backend : kernels::cpu_backend();
  // Attention at the first model's shape and the largest micro-batch up to
  // 8 (one sequence is too little work to time on a shared machine), no tp.
  const GPTConfig m0 = load_model(o.models.front());
  const int64_t att_batch =
      std::min<int64_t>(8, *std::max_element(o.micro_batch.begin(), o.micro_batch.end()));
  // The in-situ step's base tables: the smallest micro-batch asked for. The
  // memory-bound kernels are timed in a step of the same micro-batch.
  c.in_situ_batch = *std::min_element(o.micro_batch.begin(), o.micro_batch.end());
  // ... and a step at each micro-batch asked for: the slowdown shrinks as
  // the GEMMs grow (SystemSpec::in_situ_at).
  std::vector<int64_t> step_batches(o.micro_batch.begin(), o.micro_batch.end());
  std::sort(step_batches.begin(), step_batches.end());
  step_batches.erase(std::unique(step_batches.begin(), step_batches.end()), step_batches.end());
  c.kernel_rows = c.in_situ_batch * m0.seq_length;

  // Passes: every measurement is timed once per pass and takes the median
  // over the passes. On a shared machine the speed drifts by tens of percent
  // from one minute to the next; a shape timed in one burst would carry its
  // moment's speed, interleaved passes spread every measurement over the
  // whole calibration.
  const int passes = o.quick ? 1 : o.passes;
  const double min_seconds = (o.quick ? 0.005 : 0.05) / passes;
  PassSamples samples;
  samples.gemm_flops.resize(shapes.size());
  for (size_t l = 0; l < kLowp.size(); ++l)
    if (std::count(o.lowp.begin(), o.lowp.end(), kLowp[l]))
      samples.gemm_lowp_flops[l].resize(shapes.size());
  for (int pass = 0; pass < passes; ++pass) {
    // A line per pass: a full calibration takes minutes, and silence looks hung.
    if (lead)
      fmt::print("  pass {}/{}: {} GEMM shapes, attention, kernels, a training step ({:.0f} s so far)\n",
                 pass + 1, passes, shapes.size(), total.elapsed());
    std::fflush(stdout);
    Progress progress{lead, fmt::format("pass {}/{}", pass + 1, passes), &total, total.elapsed()};
    measure_pass(ranks, backend, shapes, m0, att_batch, step_batches, min_seconds, c, samples,
                 progress);
  }
  take_medians(shapes, samples, lead, c);

  ranks.barrier();
  if (lead) {
    fmt::print("  memory bandwidth (STREAM triad) ...\n");
    std::fflush(stdout);
  }
  c.triad_bandwidth = rank_mean(ranks, measure_triad_bandwidth(o.quick ? (int64_t(1) << 22)
                                                                       : (int64_t(1) << 25)));
  if (lead) fmt::print("  triad: {:.2f} GB/s per rank\n", c.triad_bandwidth / 1e9);
  // The planner charges flops / (peak * efficiency) forward and 2.5 x that
  // backward; pick the efficiency that makes the sum what was measured.
  c.attention_efficiency = 3.5 * c.attention.planner_flops /
                           (c.peak_gemm * (c.attention.forward + c.attention.backward));
  if (lead) print_attention_and_kernels(c, att_batch, m0);
  // How much slower the kernels ran in the engine's own step than the
  // tables say: every rank computes the same factors from the same numbers.
  const SystemSpec tables = load_system_text(calibration_toml(c), "calibration");
  // The in-situ micro-batch's factors are the base tables; the others' go
  // beside them (SystemSpec::in_situ_at).
  for (const auto& [mb, runs] : samples.steps) {
    std::map<Precision, Profile> at;
    at[Precision::Fp32] = in_situ_factors(upper_median(runs), tables, m0, mb);
    for (size_t l = 0; l < kLowp.size(); ++l)
      if (samples.lowp_steps[l].count(mb))
        at[kLowp[l]] = in_situ_factors(upper_median(samples.lowp_steps[l].at(mb)), tables, m0, mb,
                                       kLowp[l]);
    if (mb == c.in_situ_batch) {
      c.in_situ = at[Precision::Fp32];
      for (const auto& [p, f] : at)
        if (p != Precision::Fp32) c.in_situ_lowp[p] = f;
    } else {
      c.in_situ_at[mb] = at;
    }
  }
  if (!samples.dropout_steps.empty()) {
    // Dropout's own factor, for every precision and micro-batch (their
    // steps had none).
    GPTConfig dropping = m0;
    dropping.attention_dropout = dropping.hidden_dropout = 0.1f;
    const double f = in_situ_factors(upper_median(samples.dropout_steps), tables, dropping,
                                     c.in_situ_batch)[Op::Dropout];
    c.in_situ[Op::Dropout] = f;
    for (auto& [p, factors] : c.in_situ_lowp) factors[Op::Dropout] = f;
    for (auto& [mb, at] : c.in_situ_at)
      for (auto& [p, factors] : at) factors[Op::Dropout] = f;
  }
  if (lead) print_in_situ(c);
}

}  // namespace

Calibration calibrate_machine(comm::Communicator& world, const CalibrateOptions& o) {
  const bool lead = world.rank() == 0;
  Stopwatch total;
  Calibration c;
  c.cpu = cpu_name();
  c.threads = omp_get_max_threads();
  c.ranks = world.size();
  c.cores = int64_t(sysconf(_SC_NPROCESSORS_ONLN));
  c.devices_per_node = world.size();
  c.memory_bytes = machine_memory_bytes() / double(world.size());
  // More ranks than the cores hold (bench/tune.sh's 4 ranks on 2 cores):
  // one rank per core slot measures the kernels and the others sleep, so the
  // tables hold a rank's speed alone on its core. The planner adds what
  // sharing a core costs a layout (layout_cost.cpp, core_sharing); tables
  // measured with every rank busy held a share of it already, which the
  // sharing then counted again (every 4-rank layout planned at 2.1x its
  // measured step), and a share that depended on the kernel's length
  // against the scheduler's slice (GEMMs of microseconds 1.3x slower than
  // alone, attention of milliseconds 2.0x).
  c.kernel_ranks = int(std::min<int64_t>(world.size(), core_slots(c.cores, c.threads)));
  const auto shapes = calibration_shapes(o);
  if (lead)
    fmt::print("calibrate: {} rank(s) x {} thread(s); {} GEMM shapes, memory bandwidth, "
               "attention{}{}\n",
               c.ranks, c.threads, shapes.size(),
               c.ranks >= 2 ? ", network (ranks 0 and 1)" : "; one rank: network not measured",
               c.kernel_ranks < c.ranks
                   ? fmt::format("; kernels on {} rank(s) at once, one per core", c.kernel_ranks)
                   : "");
  const std::unique_ptr<comm::Communicator> measuring =
      world.split(world.rank() < c.kernel_ranks ? 0 : -1, world.rank(), "calibrate");
  float wake = 0;  // a message from rank 0 when the kernels are measured
  constexpr int kWakeTag = 7;
  if (measuring) {
    measure_compute(*measuring, o, shapes, lead, total, c);
    for (int r = c.kernel_ranks; lead && r < world.size(); ++r)
      world.send(&wake, 1, Precision::Fp32, r, kWakeTag);
  } else {
    // Asleep, not in a blocking call: MPI's wait polls, and would take the
    // core from the rank that measures on it.
    comm::Work w = world.recv_async(&wake, 1, Precision::Fp32, 0, kWakeTag);
    while (!w.test()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (world.size() >= 2) {
    if (lead) {
      fmt::print("  network and overlap (ranks 0 <-> 1) ...\n");
      std::fflush(stdout);
    }
    c.network = measure_network(world);
    c.comm_overlap = measure_comm_overlap(world);
    if (lead)
      fmt::print("  network: {:.2f} us latency, {:.2f} GB/s (ranks 0 <-> 1); 16 MiB all-reduce,\n"
                 "  reduce-scatter, all-gather: {:.2f}, {:.2f}, {:.2f} x the ring model\n"
                 "  overlap: {:.0f}% of an async all-reduce hidden by compute\n",
                 c.network->latency * 1e6, c.network->bandwidth / 1e9,
                 c.network->collective_factor[0], c.network->collective_factor[1],
                 c.network->collective_factor[2], 100 * c.comm_overlap);
  }
  c.seconds = total.elapsed();
  return c;
}

}  // namespace tessera::plan
