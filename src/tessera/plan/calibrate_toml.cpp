// Writes a Calibration as a planner system file (the format system.cpp
// loads), with comments that say what each number is and how it was measured.
#include <fmt/format.h>

#include <ctime>

#include "tessera/plan/calibrate.h"

namespace tessera::plan {

namespace {

std::string today() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

// TOML basic strings: escape what would end or break them.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') continue;
    out += ch;
  }
  return out + "\"";
}

}  // namespace

std::string calibration_toml(const Calibration& c) {
  std::string t;
  auto add = [&t]<typename... A>(fmt::format_string<A...> f, A&&... args) {
    t += fmt::format(f, std::forward<A>(args)...);
  };
  add("# This machine, measured by `tessera calibrate` on {} ({:.0f} s).\n", today(), c.seconds);
  add("# One device = one rank running {} OpenMP thread(s); {} rank(s) measured at once, so\n"
      "# the numbers include their contention. Calibrate again with the ranks x threads\n"
      "# of the runs you plan or validate.\n",
      c.threads, c.kernel_ranks);
  if (c.kernel_ranks < c.ranks)
    add("# {} ranks on {} core(s): the kernels were measured by {} rank(s), one per core,\n"
        "# the others asleep; the planner adds what sharing a core costs a layout.\n",
        c.ranks, c.cores, c.kernel_ranks);
  add("name = \"local\"\n");
  add("description = {}\n\n", quoted(fmt::format("{} ({} rank(s) x {} thread(s)), calibrated",
                                                 c.cpu, c.ranks, c.threads)));
  add("# source: measured by tessera calibrate: the ranks x threads measured with;\n"
      "# `plan --validate` and `train --dry-run` warn when a run's differ (the numbers\n"
      "# include this many ranks' contention); cores: the machine's online CPUs, which\n"
      "# a run of more ranks x threads shares; kernel_ranks: the ranks that measured\n"
      "# the kernels at once (one per core when the ranks outnumber the cores).\n");
  add("[calibration]\nranks = {}\nthreads = {}\ncores = {}\nkernel_ranks = {}\n", c.ranks,
      c.threads, c.cores, c.kernel_ranks);
  if (c.in_situ_batch > 0) add("in_situ_micro_batch = {}\n", c.in_situ_batch);
  t += "\n";
  add("[device]\n");
  add("name = {}\n", quoted(c.cpu));
  add("memory_GB = {:.3f}                # source: measured by tessera calibrate: the machine's "
      "memory / ranks per node\n",
      c.memory_bytes / 1e9);
  add("# source: none measured — estimate: 10 % of the memory for the OS, MPI buffers and\n"
      "# the allocator.\n");
  add("reserved_GB = {:.3f}\n", 0.1 * c.memory_bytes / 1e9);
  add("memory_bandwidth_GBps = {:.3f}    # source: measured by tessera calibrate: STREAM triad, "
      "the ranks measuring at once\n",
      c.triad_bandwidth / 1e9);
  add("memory_efficiency = 1.0          # source: the bandwidth above is itself a measured triad\n");
  add("compute_units = {}                # source: measured by tessera calibrate: OpenMP threads "
      "per rank\n",
      c.threads);
  add("# source: measured by tessera calibrate: fp32 peak = the best measured sgemm (oneDNN);\n");
  std::string peaks = fmt::format("fp32 = {:.6f}", c.peak_gemm / 1e12);
  for (const auto& [name, peak] : {std::pair{"bf16", c.peak_gemm_bf16}, {"fp16", c.peak_gemm_fp16}}) {
    if (peak > 0) {
      add("# {0} = the best measured {0} GEMM of the engine (fp32 accumulation; "
          "[[gemm.measured_{0}]]).\n",
          name);
      peaks += fmt::format(", {} = {:.6f}", name, peak / 1e12);
    } else {
      add("# no {0} GEMMs measured (not asked, or no real {0} kernel here): {0} plans take\n"
          "# the fp32 rate.\n",
          name);
    }
  }
  add("peak_TFLOPs = {{ {} }}\n\n", peaks);
  add("[node]\n");
  add("devices = {}                      # source: measured by tessera calibrate: ranks run at "
      "once\n",
      c.devices_per_node);
  if (c.network) {
    add("# source: measured by tessera calibrate: an async 16 MiB all-reduce beside the\n"
        "# engine's GEMMs, the part compute hid.\n");
    add("comm_overlap = {:.3f}\n", c.comm_overlap);
  }
  t += "\n";
  add("[gemm]\n");
  add("max_efficiency = 1.0             # source: the peak above is itself measured\n");
  add("# source: measured by tessera calibrate: the engine's flash-style attention,\n"
      "# forward + backward, as a fraction of peak\n"
      "# under the planner's formula (4 b s^2 h forward, backward 2.5 x forward): measured\n"
      "# {:.3f} ms + {:.3f} ms at b {} s {} h {} heads {}.\n",
      c.attention.forward * 1e3, c.attention.backward * 1e3, c.attention.batch, c.attention.seq,
      c.attention.hidden, c.attention.heads);
  add("attention_efficiency = {:.6f}\n\n", c.attention_efficiency);
  add("# source: measured by tessera calibrate: sgemm as a training step calls it (forward\n"
      "# N,T; input grad N,N; weight grad T,N), in the planner's (m, n, k) naming; the\n"
      "# planner uses the nearest shape.\n");
  for (const auto& g : c.gemm)
    add("[[gemm.measured]]\nm = {}\nn = {}\nk = {}\nTFLOPs = {:.6f}\n", g.m, g.n, g.k, g.flops / 1e12);
  t += "\n";
  for (const auto& [name, samples] : {std::pair{"bf16", &c.gemm_bf16}, {"fp16", &c.gemm_fp16}}) {
    if (samples->empty()) continue;
    add("# source: measured by tessera calibrate: the engine's {0} GEMMs (kernels/cpu/\n"
        "# matmul_lowp.h: {0} operands, fp32 accumulation; fp16 widened to fp32 first where\n"
        "# oneDNN has no f16 matmul) on the same shapes and roles, the weight gradient split\n"
        "# as the engine splits it; {0} plans take these.\n",
        name);
    for (const auto& g : *samples)
      add("[[gemm.measured_{}]]\nm = {}\nn = {}\nk = {}\nTFLOPs = {:.6f}\n", name, g.m, g.n, g.k,
          g.flops / 1e12);
    t += "\n";
  }
  add("# source: measured by tessera calibrate: each memory-bound call of one training\n"
      "# micro-batch ({} tokens) of one layer of the model above, timed where the step\n"
      "# runs it through the backend, ns per element, by the Backend call's name\n"
      "# (kernels/backend.h); a linear's bias and bias gradient, AdamW and the gradient\n"
      "# norm timed by their calls alone; attention_dropout: per draw of the flash\n"
      "# kernel's mask, what the mask adds to the kernel over its draws. The planner\n"
      "# scales them by element count.\n",
      c.kernel_rows);
  add("[kernels]\n");
  // Quoted: a call of one part of a fused kernel is named with a dot.
  for (const auto& [name, rate] : c.kernels)
    if (rate > 0) add("\"{}\" = {:.6g}\n", name, rate * 1e9);
  t += "\n";
  // mb: the step's micro-batch; the base tables ([in_situ], ...) are c.in_situ_batch's.
  auto in_situ = [&](Precision p, int64_t mb, const Profile& f) {
    add("# source: measured by tessera calibrate: one {} training micro-batch ({} sequences)\n"
        "# of the model above through the engine itself, by kind of work, over what the\n"
        "# tables above predict for it: how much slower the kernels run inside a step\n"
        "# (dropout: the same step with dropout 0.1 where the model has none; the median\n"
        "# of every timed run of every pass).\n",
        precision_name(p), mb);
    const std::string base = mb == c.in_situ_batch ? "in_situ" : fmt::format("in_situ_mb{}", mb);
    add("[{}]\n", p == Precision::Fp32 ? base : fmt::format("{}_{}", base, precision_name(p)));
    for (size_t k = 0; k < size_t(Op::kCount); ++k)
      if (Op(k) != Op::Comm && f.seconds[k] != 1.0)
        add("{} = {:.4f}\n", quoted(std::string(op_name(Op(k)))), f.seconds[k]);
    t += "\n";
  };
  if (c.in_situ_batch > 0) {
    in_situ(Precision::Fp32, c.in_situ_batch, c.in_situ);
    for (const auto& [p, f] : c.in_situ_lowp) in_situ(p, c.in_situ_batch, f);
    for (const auto& [mb, at] : c.in_situ_at)
      for (const auto& [p, f] : at) in_situ(p, mb, f);
  }
  if (c.network) {
    add("# source: measured by tessera calibrate: ping-pong between ranks 0 and 1 through\n"
        "# the engine's Communicator (MPI); efficiency 1: the bandwidth is itself measured.\n"
        "# The factors: the engine's all-reduce, reduce-scatter and all-gather of 16 MiB\n"
        "# over all ranks (medians of 9): measured time less the ring model's latency\n"
        "# terms, over its bandwidth term.\n");
    add("[[network]]\nname = \"mpi-shared-memory\"\nranks = 0\n");
    add("bandwidth_GBps = {:.6f}\nlatency_us = {:.3f}\nefficiency = 1.0\n",
        c.network->bandwidth / 1e9, c.network->latency * 1e6);
    const auto& f = c.network->collective_factor;
    add("all_reduce_factor = {:.4f}\nreduce_scatter_factor = {:.4f}\nall_gather_factor = {:.4f}\n",
        f[0], f[1], f[2]);
  } else {
    add("# source: none measured — NOT MEASURED: calibrated with one rank. A placeholder\n"
        "# so the file loads: half the triad bandwidth (a copy reads and writes) and 1 us.\n"
        "# Run `scripts/mpirun.sh -n 2 tessera calibrate` to measure it.\n");
    add("[[network]]\nname = \"unmeasured\"\nranks = 0\n");
    add("bandwidth_GBps = {:.6f}\nlatency_us = 1.0\nefficiency = 1.0\n",
        c.triad_bandwidth / 2 / 1e9);
  }
  return t;
}

}  // namespace tessera::plan
