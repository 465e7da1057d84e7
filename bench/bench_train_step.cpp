// Training-step throughput of the engine on GPT-2 shapes, with the step-time
// breakdown by kind of work and the GEMM peak at the run's precision
// (`bench peak`'s fp32 sgemm, or `bench peak --bf16` / `--fp16`'s 16-bit
// GEMM) measured in the same run, before and after the steps, so the share
// of the peak (the trainer's of_gemm_peak) compares like with like on a
// shared, noisy machine.
//
//   bench_train_step --L 12 --C 768 --NH 12 --B 4 --T 64 --steps 8 [--precision bf16]
// The last line (RESULT ...) carries the median step time and tokens/s, in
// the same form as ../shared/peers/torch_gpt2_bench.py's, so
// bench/train_throughput.sh can print the ratio.
#include <omp.h>

#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "tessera/core/rng.h"
#include "tessera/model/param_layout.h"
#include "tessera/train/peak.h"
#include "tessera/train/sampled_batches.h"
#include "tessera/train/trainer.h"

using namespace tessera;

namespace {

// CPU seconds used by the whole process so far: with OMP_WAIT_POLICY=passive
// (no spinning at barriers) its per-step difference is the work done, which
// a machine shared with other jobs inflates far less than the wall time.
double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct BenchArgs {
  int64_t L = 12, C = 768, NH = 12, V = 50257, maxT = 1024, B = 4, T = 64;
  int steps = 8, warmup = 2, threads = 2;
  std::string precision = "fp32";  // fp32 | bf16 | fp16
};

TrainConfig bench_config(const BenchArgs& a) {
  TrainConfig cfg;
  cfg.model.num_layers = a.L;
  cfg.model.hidden_size = a.C;
  cfg.model.num_heads = a.NH;
  cfg.model.vocab_size = a.V;
  cfg.model.seq_length = a.T;
  cfg.model.max_position_embeddings = a.maxT;
  cfg.par.micro_batch = a.B;
  cfg.par.global_batch = a.B;
  cfg.train_iters = a.steps + a.warmup;
  // The PyTorch peer's optimizer settings.
  cfg.optim.lr = 1e-4f;
  cfg.optim.min_lr = 1e-4f;
  cfg.optim.beta2 = 0.999f;
  cfg.optim.weight_decay = 0;
  cfg.optim.clip_grad = 0;  // the peer does not clip
  cfg.peak_tflops = 1;      // replaced below by the in-run measurement
  cfg.valid_fraction = 0;
  cfg.bf16 = a.precision == "bf16";
  cfg.fp16 = a.precision == "fp16";
  cfg.validate(1);
  return cfg;
}

// Where the time goes: mean seconds per step by kind of work.
void print_breakdown(const std::vector<StepStats>& stats, double peak) {
  Profile mean;
  double mean_step = 0;
  for (auto& s : stats) {
    for (size_t i = 0; i < size_t(Op::kCount); ++i)
      mean.seconds[i] += s.profile.seconds[i] / double(stats.size());
    mean_step += s.seconds / double(stats.size());
  }
  fmt::print("breakdown (mean of {} steps, {:.1f} ms):\n", stats.size(), mean_step * 1e3);
  for (size_t i = 0; i < size_t(Op::kCount); ++i)
    if (mean.seconds[i] > 0)
      fmt::print("  {:<10} {:8.1f} ms  {:5.1f}%\n", op_name(Op(i)), mean.seconds[i] * 1e3,
                 100.0 * mean.seconds[i] / mean_step);
  const double other = mean_step - mean.total();
  fmt::print("  {:<10} {:8.1f} ms  {:5.1f}%\n", "other", other * 1e3, 100.0 * other / mean_step);
  const double gemm_flops = stats[0].model_flops;  // nearly all model FLOPs are GEMMs
  fmt::print("  GEMM time runs at {:.1f} GFLOP/s ({:.0f}% of peak)\n",
             gemm_flops / mean.seconds[size_t(Op::Gemm)] / 1e9,
             100.0 * gemm_flops / mean.seconds[size_t(Op::Gemm)] / 1e12 / peak);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera training-step benchmark"};
  BenchArgs a;
  app.add_option("--L", a.L);
  app.add_option("--C", a.C);
  app.add_option("--NH", a.NH);
  app.add_option("--V", a.V);
  app.add_option("--maxT", a.maxT);
  app.add_option("--B", a.B);
  app.add_option("--T", a.T);
  app.add_option("--steps", a.steps);
  app.add_option("--warmup", a.warmup);
  app.add_option("--threads", a.threads);
  app.add_option("--precision", a.precision)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  CLI11_PARSE(app, argc, argv);
  omp_set_num_threads(a.threads);
  const int64_t L = a.L, C = a.C, NH = a.NH, V = a.V, B = a.B, T = a.T;
  const int steps = a.steps, warmup = a.warmup;

  TrainConfig cfg = bench_config(a);
  std::vector<int32_t> tokens(size_t(64 * (T + 1) * (steps + warmup) * B));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(rng_u64(1, 0, i) % uint64_t(V));
  SampledBatches data(memory_token_source(tokens, "random tokens"), V, T, cfg.seed, 0.0);
  Trainer trainer(cfg, data);

  fmt::print("shape: L {} C {} NH {} V {} | B {} T {} | {:.1f} M parameters | {} threads\n", L, C,
             NH, V, B, T, double(ParamLayout::count_model_params(cfg.model)) / 1e6, a.threads);
  Precision prec = Precision::Fp32;
  precision_parse(a.precision, prec);  // CLI11 checked the name
  // The ceiling is the best the GEMM did in this run: measured on both sides
  // of the steps, so a load that came or went during them shows as a gap
  // between the two (printed) rather than as a wrong share.
  const double peak_before = measure_gemm_peak(false, prec);

  std::vector<StepStats> stats;
  std::vector<double> cpu_secs;  // (steps) process CPU seconds of each measured step
  for (int s = 1; s <= steps + warmup; ++s) {
    const double c0 = process_cpu_seconds();
    StepStats st = trainer.train_step(s);
    if (s > warmup) stats.push_back(st), cpu_secs.push_back(process_cpu_seconds() - c0);
  }
  const double peak_after = measure_gemm_peak(false, prec);
  const double peak = std::max(peak_before, peak_after);
  fmt::print("measured {} GEMM peak (same run, best of before / after the steps): {:.1f} GFLOP/s "
             "({:.1f} before, {:.1f} after)\n",
             a.precision, peak * 1e3, peak_before * 1e3, peak_after * 1e3);
  std::sort(cpu_secs.begin(), cpu_secs.end());
  std::vector<double> secs;
  for (auto& s : stats) secs.push_back(s.seconds);
  std::sort(secs.begin(), secs.end());
  const double median = secs[secs.size() / 2];
  const double tok_s = double(B * T) / median;
  const double gflops = stats[0].model_flops / median / 1e9;
  fmt::print("step {:.1f} ms (median of {}) | {:.1f} tokens/s | {:.1f} GFLOP/s | {:.1f}% of the "
             "measured {} GEMM peak\n",
             median * 1e3, steps, tok_s, gflops, 100.0 * gflops / (peak * 1e3), a.precision);
  print_breakdown(stats, peak);
  fmt::print("CPU time per step {:.1f} ms (median; with OMP_WAIT_POLICY=passive the load-robust "
             "figure)\n",
             cpu_secs[cpu_secs.size() / 2] * 1e3);
  // of_gemm_peak as the trainer's metrics define it (model FLOP/s over the
  // measured GEMM peak at the run's precision); tok_per_s stays last, where
  // bench/train_throughput.sh reads it.
  fmt::print("RESULT tessera L={} C={} B={} T={} precision={} of_gemm_peak={:.3f} step_ms={:.1f} "
             "tok_per_s={:.1f}\n",
             L, C, B, T, a.precision, gflops / (peak * 1e3), median * 1e3, tok_s);
  return 0;
}
