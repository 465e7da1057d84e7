// `tessera calibrate`: measure this machine with the engine's own kernels and
// write a planner system file (configs/systems/local.toml by default), so that
// `tessera plan --system local` predicts what `tessera train` will measure.
// Under `scripts/mpirun.sh -n N` every rank measures at once (their
// contention is part of the numbers) and ranks 0 and 1 measure the network.
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>

#include "tessera/cli/collective_errors.h"
#include "tessera/cli/commands.h"
#include "tessera/comm/mpi_runtime.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/calibrate.h"
#include "tessera/plan/model_presets.h"

namespace tessera::cli {

namespace {

struct CalibrateArgs {
  std::string output;
  std::vector<std::string> models;
  std::vector<int64_t> micro_batch{1, 2, 4, 8, 16}, tp{1, 2};
  double max_gflop = 4;  // skip larger grid GEMMs: the planner's nearest shape is at the plateau
  int threads = 0;
  bool quick = false;
  int passes = 5;
};

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

// The memory this process may use: the machine's, or the container's limit.
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

// Distinct shapes of the training steps of the models, plus a coarse grid so
// that the planner's nearest-shape lookup has neighbours for other models.
std::vector<plan::CalibShape> shapes_to_measure(const CalibrateArgs& a) {
  std::map<std::tuple<int64_t, int64_t, int64_t>, plan::CalibShape> unique;
  auto add = [&](const plan::CalibShape& s) { unique.emplace(std::tuple{s.m, s.n, s.k}, s); };
  for (const auto& name : a.models) {
    const GPTConfig m = plan::load_model(name);
    for (int64_t t : a.tp)
      if (m.num_heads % t == 0)
        for (int64_t mb : a.micro_batch)
          for (const auto& s : plan::training_gemm_shapes(m, mb, t)) add(s);
  }
  if (!a.quick)
    for (int64_t m : {128, 512, 2048, 8192})
      for (int64_t n : {256, 1024, 4096})
        for (int64_t k : {256, 1024, 4096})
          if (2.0 * double(m * n * k) <= a.max_gflop * 1e9) add({m, n, k, 'N', 'T', m, n, k});
  std::vector<plan::CalibShape> out;
  for (auto& [key, s] : unique) out.push_back(s);
  return out;
}

void run_calibrate(const CalibrateArgs& a) {
  comm::MpiRuntime rt(nullptr, nullptr);
  auto world = rt.world();
  const bool lead = world->rank() == 0;
  if (a.threads > 0) omp_set_num_threads(a.threads);
  // Bad input before a minute of measuring: the output must be writable and
  // every model must load, on every rank alike.
  agree(*world, [&] {
    for (const auto& m : a.models) plan::load_model(m);
    if (!lead) return;
    const std::filesystem::path p(a.output);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    const std::string probe = a.output + ".tmp";
    TESSERA_CHECK(bool(std::ofstream(probe)), "--output {}: cannot write there", a.output);
    std::filesystem::remove(probe);
  });
  Stopwatch total;

  plan::Calibration c;
  c.cpu = cpu_name();
  c.threads = omp_get_max_threads();
  c.ranks = world->size();
  c.devices_per_node = world->size();
  c.memory_bytes = machine_memory_bytes() / double(world->size());
  // Each rank's own measurement, averaged over the ranks (they ran at once).
  auto mean = [&](double x) { return double(world->all_reduce_scalar(float(x))) / world->size(); };

  const auto shapes = shapes_to_measure(a);
  if (lead)
    fmt::print("calibrate: {} rank(s) x {} thread(s); {} GEMM shapes, memory bandwidth, "
               "attention{}\n",
               c.ranks, c.threads, shapes.size(),
               c.ranks >= 2 ? ", network (ranks 0 and 1)" : "; one rank: network not measured");
  // Attention and the memory-bound kernels at the first model's shape and
  // the largest micro-batch up to 8 (one sequence is too little work to time
  // on a shared machine), no tp.
  const GPTConfig m0 = plan::load_model(a.models.front());
  const int64_t att_batch =
      std::min<int64_t>(8, *std::max_element(a.micro_batch.begin(), a.micro_batch.end()));
  c.kernel_rows = att_batch * m0.seq_length;

  // Passes: every GEMM shape, the attention and the kernels are timed once
  // per pass and each takes the median over the passes. On a shared machine
  // the speed drifts by tens of percent from one minute to the next; a shape
  // timed in one burst would carry its moment's speed, interleaved passes
  // spread every measurement over the whole calibration.
  const int passes = a.quick ? 1 : a.passes;
  const double min_seconds = (a.quick ? 0.005 : 0.05) / passes;
  std::vector<std::vector<double>> gemm_flops(shapes.size());
  std::vector<double> att_forward, att_backward;
  std::vector<std::vector<double>> kernels(plan::kKernelCount);
  // The in-situ step: the smallest micro-batch asked for (the factors are
  // taken as shape-independent; a different shape from most checks).
  c.in_situ_batch = *std::min_element(a.micro_batch.begin(), a.micro_batch.end());
  std::vector<Profile> steps;
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      world->barrier();
      gemm_flops[i].push_back(mean(plan::measure_gemm(shapes[i], min_seconds)));
    }
    world->barrier();
    const plan::AttentionTime at =
        plan::measure_attention(att_batch, m0.seq_length, m0.hidden_size, m0.num_heads);
    att_forward.push_back(mean(at.forward));
    att_backward.push_back(mean(at.backward));
    c.attention = at;
    world->barrier();
    const plan::KernelTimes k =
        plan::measure_kernels(c.kernel_rows, m0.hidden_size, m0.ffn(), m0.padded_vocab(1),
                              m0.seq_length, ParamLayout::count_model_params(m0), min_seconds);
    // ns through the float all-reduce, which keeps their digits
    for (size_t i = 0; i < plan::kKernelCount; ++i) kernels[i].push_back(mean(k[i] * 1e9) * 1e-9);
    world->barrier();
    Profile step = plan::measure_training_step(m0, c.in_situ_batch, 2);
    for (double& x : step.seconds) x = mean(x * 1e3) * 1e-3;  // ms through the float all-reduce
    steps.push_back(step);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& s = shapes[i];
    const double flops = plan::upper_median(gemm_flops[i]);
    c.gemm.push_back({s.m, s.n, s.k, flops});
    c.peak_gemm = std::max(c.peak_gemm, flops);
    if (lead)
      fmt::print("  sgemm {}{} {:>5} x {:>5} x {:>5}  (plan m {} n {} k {}): {:7.1f} GFLOP/s\n",
                 s.ta, s.tb, s.M, s.N, s.K, s.m, s.n, s.k, flops / 1e9);
  }
  c.attention.forward = plan::upper_median(att_forward);
  c.attention.backward = plan::upper_median(att_backward);
  for (size_t i = 0; i < plan::kKernelCount; ++i) c.kernels[i] = plan::upper_median(kernels[i]);

  world->barrier();
  c.triad_bandwidth = mean(plan::measure_triad_bandwidth(a.quick ? (int64_t(1) << 22)
                                                                 : (int64_t(1) << 25)));
  if (lead) fmt::print("  triad: {:.2f} GB/s per rank\n", c.triad_bandwidth / 1e9);

  // The planner charges flops / (peak * efficiency) forward and 2.5 x that
  // backward; pick the efficiency that makes the sum what was measured.
  c.attention_efficiency = 3.5 * c.attention.planner_flops /
                           (c.peak_gemm * (c.attention.forward + c.attention.backward));
  if (lead)
    fmt::print("  attention (b {} s {} h {} heads {}): {:.3f} ms forward, {:.3f} ms backward "
               "(efficiency {:.3f} of peak in the planner's terms)\n",
               att_batch, m0.seq_length, m0.hidden_size, m0.num_heads, c.attention.forward * 1e3,
               c.attention.backward * 1e3, c.attention_efficiency);

  if (lead) {
    fmt::print("  kernels (ns per element, {} tokens):", c.kernel_rows);
    for (size_t i = 0; i < plan::kKernelCount; ++i)
      fmt::print(" {} {:.3f}", plan::kernel_name(plan::Kernel(i)), c.kernels[i] * 1e9);
    fmt::print("\n");
  }

  // How much slower the kernels ran in the engine's own step than the
  // tables say: every rank computes the same factors from the same numbers.
  c.in_situ = plan::in_situ_factors(plan::upper_median(steps),
                                    plan::load_system_text(plan::calibration_toml(c), "calibration"),
                                    m0, c.in_situ_batch);
  if (lead) {
    fmt::print("  in situ (a training step of micro-batch {} over the tables):", c.in_situ_batch);
    for (Op op : {Op::Gemm, Op::Attention, Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding,
                  Op::Loss})
      fmt::print(" {} {:.2f}", op_name(op), c.in_situ[op]);
    fmt::print("\n");
  }

  if (world->size() >= 2) {
    c.network = plan::measure_network(*world);
    c.comm_overlap = plan::measure_comm_overlap(*world);
    if (lead)
      fmt::print("  network: {:.2f} us latency, {:.2f} GB/s (ranks 0 <-> 1)\n"
                 "  overlap: {:.0f}% of an async all-reduce hidden by compute\n",
                 c.network->latency * 1e6, c.network->bandwidth / 1e9, 100 * c.comm_overlap);
  }
  c.seconds = total.elapsed();

  // Rank 0 writes; agree() so that a failure there (the file does not load
  // back) ends every rank instead of leaving the others in a barrier.
  agree(*world, [&] {
    if (!lead) return;
    const std::string tmp = a.output + ".tmp";
    {
      std::ofstream out(tmp);
      TESSERA_CHECK(bool(out), "--output {}: cannot open for writing", a.output);
      out << plan::calibration_toml(c);
    }
    plan::load_system_file(tmp);  // what was written must load
    std::filesystem::rename(tmp, a.output);
    fmt::print("peak sgemm {:.1f} GFLOP/s; wrote {} in {:.0f} s\n", c.peak_gemm / 1e9, a.output,
               c.seconds);
  });
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  a->output = plan::config_dir() + "/systems/local.toml";
  a->models = {plan::config_dir() + "/models/tiny-local.toml"};
  auto* cmd = app.add_subcommand(
      "calibrate",
      "measure this machine (GEMMs, memory bandwidth, attention, MPI) and write a planner "
      "system file; run under scripts/mpirun.sh -n 2 to measure the network too");
  cmd->add_option("--output", a->output, "system file to write")->capture_default_str();
  cmd->add_option("--model", a->models, "models whose training GEMMs to measure (presets or .toml)")
      ->capture_default_str();
  cmd->add_option("--micro-batch", a->micro_batch, "micro-batch sizes to measure")
      ->capture_default_str();
  cmd->add_option("--tp", a->tp, "tensor-parallel degrees to measure")->capture_default_str();
  cmd->add_option("--max-gflop", a->max_gflop,
                  "skip coarse-grid GEMMs larger than this (the models' own shapes are always "
                  "measured)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads per rank (default: OpenMP's)");
  cmd->add_flag("--quick", a->quick, "fewer shapes and shorter timings, one pass (tests)");
  cmd->add_option("--passes", a->passes,
                  "interleaved passes over every measurement, each taking the median over them "
                  "(a shared machine's speed drifts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->callback([a] {
    CalibrateArgs args = *a;
    if (args.quick) args.micro_batch = {args.micro_batch.front()}, args.tp = {1};
    run_calibrate(args);
  });
}

}  // namespace tessera::cli
