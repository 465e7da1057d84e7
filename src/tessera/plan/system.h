// SystemSpec: a machine as the planner sees it — one device type, devices
// per node, and the network as tiers of consecutive ranks. Loaded from TOML
// (configs/systems/*.toml); every missing field is an error naming the file.
#pragma once
#include <algorithm>
#include <array>
#include <map>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/profile.h"
#include "tessera/kernels/precision.h"
#include "tessera/plan/kernel_rates.h"

namespace tessera::plan {

// A tier of the network: the link a collective uses when all its ranks lie
// within one block of `ranks` consecutive ranks (0: the whole machine).
struct NetworkTier {
  std::string name;
  int64_t ranks = 0;         // block size in ranks; 0 = unbounded (the inter-node network)
  double bandwidth = 0;      // bytes/s, one direction, per device (already divided per node)
  double latency = 0;        // seconds per message (alpha)
  double efficiency = 1.0;   // achieved fraction of `bandwidth`
  // Measured bandwidth time of each collective over the ring model's on
  // this tier (comm_model.cpp; the latency terms stay), [all-reduce,
  // reduce-scatter, all-gather]: an MPI
  // collective on a CPU also reduces on the cores and picks its own
  // algorithm, so it is not the ping-pong's bandwidth. 1 where not measured
  // (GPU systems: NCCL's bus bandwidth is `efficiency`, alike for the three).
  std::array<double, 3> collective_factor{1.0, 1.0, 1.0};
  double effective_bandwidth() const { return bandwidth * efficiency; }
};

// One measured GEMM (from `tessera calibrate`): shape and achieved FLOP/s.
struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double flops = 0;  // FLOP/s achieved
};

// The core slots of a CPU machine for ranks of `threads` threads each: the
// ranks it runs without two sharing a core (at least one). `calibrate`
// measures its kernels on this many ranks; the planner's core_sharing binds
// rank r to slot r mod slots.
inline int64_t core_slots(int64_t cores, int64_t threads) {
  return std::max<int64_t>(1, cores / std::max<int64_t>(1, threads));
}

struct SystemSpec {
  std::string name, description, source;  // source: the file it came from
  // Top-level `stack` (optional): the software its numbers were measured on
  // (e.g. "CUDA 11.x, cuBLAS 11, NCCL 2.8 (2021)"); "" when the file names none.
  std::string stack;
  std::string device_name;
  int64_t devices_per_node = 1;
  // Dense peaks, FLOP/s, as the file's peak_TFLOPs gives them. A precision
  // the file does not list runs at one it does (bf16 <-> fp16, then fp32: a
  // CPU without 16-bit units computes them at its fp32 rate).
  double peak_flops_fp16 = 0, peak_flops_bf16 = 0;
  double peak_flops_32 = 0;   // FLOP/s, fp32
  // peak_TFLOPs.fp8 (dense), FLOP/s; 0: the device has no fp8 units.
  // `--precision fp8` plans run their linear GEMMs at it (PlanLayout::fp8).
  double peak_flops_fp8 = 0;
  double memory_bytes = 0;    // per device
  double reserved_bytes = 0;  // runtime, communication buffers, fragmentation
  double memory_bandwidth = 0;   // bytes/s, [device] memory_bandwidth_GBps (datasheet or measured)
  // [device] memory_efficiency: the fraction of memory_bandwidth a STREAM-like
  // kernel reaches (a public measurement for the datasheet systems; 1 in a
  // calibration, whose bandwidth is itself a measured triad). Memory-bound
  // kernels run at achieved_memory_bandwidth().
  double memory_efficiency = 1.0;
  int64_t compute_units = 1;  // SMs / CUs: a GEMM with fewer output tiles leaves units idle
  // [device] sustained_clock_fraction: the clock a device holds through a
  // training run's minutes of dense matrix work, as a fraction of the clock
  // its GEMM and attention microbenchmarks ran at (short bursts at boost:
  // gemm_max_efficiency, attention_efficiency). A power-limited GPU lowers
  // its clock under sustained tensor-core load; a GEMM's compute time grows
  // as 1 / sustained_clock, its memory-bound time not. 1 (the default, and a
  // CPU's calibration, whose GEMMs are measured inside its steps): none.
  double sustained_clock = 1.0;
  // [device] speed_spread: the standard deviation of one device's speed
  // across devices of the same SKU, as a fraction of the mean (silicon
  // lottery, cooling, power management). The slowest of a job's devices
  // paces every synchronous step (straggler.h). 0 (the default, and a CPU's
  // calibration, which measures its own ranks): none.
  double device_speed_spread = 0.0;
  double gemm_max_efficiency = 0.7;
  int64_t tile_m = 128, tile_n = 128;
  double attention_efficiency = 0.5;  // flash attention, relative to a large GEMM
  // [gemm] attention_backward_efficiency: the backward kernel's rate on the
  // same scale (relative to peak x gemm_max_efficiency, on its 2.5 x forward
  // FLOPs). A flash kernel's backward runs at a lower fraction of peak than
  // its forward (more matmuls per byte of softmax state, atomics on dq).
  // 0 (the default: a CPU calibration, which measures one rate over both,
  // and every file without the key): the forward's attention_efficiency.
  double attention_backward_efficiency = 0.0;
  double attention_backward_rate() const {
    return attention_backward_efficiency > 0 ? attention_backward_efficiency : attention_efficiency;
  }
  // [gemm] causal_speedup: how much faster the system's flash-attention
  // kernel runs a causal pass than a non-causal one at long sequences (it
  // skips the tiles above the mask's diagonal: causal_attention.h). 0 (the
  // default, a CPU calibration, whose attention_efficiency is measured under
  // the full count, and the unfused attention of `--no-flash-attention`):
  // the whole matrix is priced.
  double attention_causal_speedup = 0.0;
  // [gemm] triton_attention_rate / triton_attention_backward_rate:
  // FlashAttention in Triton (the FlashAttention-1-era kernel llm-foundry's
  // `attn_impl: triton` runs) against this file's flash kernel, forward (and
  // its recomputation) and backward: a run marked `attention-kernel =
  // "triton"` (PlanLayout::triton_attention) prices each pass at its rate
  // above x this. 0 (the default): no figure; such a run is refused naming
  // the keys.
  double triton_attention_rate = 0.0;
  double triton_attention_backward_rate = 0.0;
  // The factor on attention_efficiency / attention_backward_rate() of a pass.
  double triton_attention_factor(bool backward) const {
    return backward ? triton_attention_backward_rate : triton_attention_rate;
  }
  std::vector<NetworkTier> tiers;     // fastest first; the last has ranks = 0
  // [node] comm_overlap: the fraction of an overlapped collective that
  // compute hides (1: dedicated copy engines and NICs; a CPU's collectives
  // need the cores the compute uses; below 0, overlapping costs more than
  // running one after the other; measured by `tessera calibrate` with >= 2
  // ranks). sync_wait_us: the mean wait at one blocking synchronisation for
  // a rank that came late (OS noise); not measured by calibrate, whose
  // barrier experiment saw 0.04-2.6 ms from one minute to the next where
  // training runs saw almost none (docs/planner.md); 0 unless a file says.
  double comm_overlap = 1.0;
  double sync_wait = 0.0;  // seconds per synchronisation
  // [in_situ]: by kind of compute work, how much slower the kernels run
  // inside a training step than alone (operands from memory rather than
  // cache, the other rank's traffic): `tessera calibrate` runs the engine's
  // own step and divides by what the tables above predict for it. Factors,
  // 1 where not measured; not applied to Op::Comm. [in_situ] comes from an
  // fp32 step; [in_situ_bf16] / [in_situ_fp16] from a step of that precision
  // (its 16-bit GEMMs and the casts between them), where calibrate measured
  // one; a precision without its own takes [in_situ] (in_situ_for).
  Profile in_situ = unit_factors();
  std::map<Precision, Profile> in_situ_lowp;
  // The slowdown depends on the step's size: small GEMMs lose more of their
  // operands to the other kernels' traffic between them (measured here: 1.14
  // at micro-batch 2 of the default model, 1.01 at 8). [calibration]
  // in_situ_micro_batch is the micro-batch of the tables above (0: not
  // known, an older file), and [in_situ_mb<B>] (fp32) / [in_situ_mb<B>_bf16]
  // / [in_situ_mb<B>_fp16] the same factors from steps of micro-batch B,
  // for the other micro-batches calibrate measured. A layout takes the
  // factors of the measured micro-batch nearest its own (in ratio; a tie
  // takes the larger), falling back by precision as above.
  int64_t in_situ_micro_batch = 0;
  std::map<int64_t, std::map<Precision, Profile>> in_situ_at;  // micro-batch -> precision -> factors
  const Profile& in_situ_for(Precision p, int64_t micro_batch = 0) const {
    return const_cast<SystemSpec*>(this)->in_situ_for(p, micro_batch);
  }
  Profile& in_situ_for(Precision p, int64_t micro_batch = 0);
  // Every table of precision p's factors (the base one and each micro-batch's):
  // what `tessera tune`'s correction scales.
  std::vector<Profile*> in_situ_tables(Precision p);
  static Profile unit_factors() {
    Profile p;
    p.seconds.fill(1.0);
    return p;
  }
  std::vector<GemmSample> gemm_measured;  // empty: the roofline/tiling model
  // [[gemm.measured_bf16]] / [[gemm.measured_fp16]]: the engine's bf16 and
  // fp16 GEMMs (fp32 accumulation; on a CPU without an fp16 matmul the fp16
  // operands widened to fp32 first) on the same shapes, for bf16 and fp16
  // layouts; empty: that precision takes gemm_measured (a CPU without
  // 16-bit units runs them at fp32's rate).
  std::vector<GemmSample> gemm_measured_bf16, gemm_measured_fp16;
  // [kernels]: measured seconds per element of the engine's memory-bound
  // kernels, by the Backend call's name (kernel_rates.h); a call not in it
  // is priced at its bytes over the achieved memory bandwidth.
  KernelRates kernel_rates;

  // [calibration]: a `tessera calibrate` file's ranks x threads per rank
  // (0: not a calibration, or an older one); its numbers hold for runs of
  // the same ranks x threads (contention), so a run that differs is warned.
  int64_t calibrated_ranks = 0, calibrated_threads = 0;
  // [calibration] cores: the CPU cores of the machine calibrated (0: a GPU
  // system, or an older calibration). A run with more ranks x threads than
  // cores shares them (layout_cost.cpp, core_sharing).
  int64_t cores = 0;
  // [calibration] kernel_ranks: the ranks that measured the kernels at once,
  // one per core slot when ranks x threads exceed the cores (the others
  // slept). 0: not written, a calibration from before 2026-12-02, in which
  // every rank measured at once.
  int64_t kernel_ranks = 0;
  // A calibration of more ranks x threads than cores whose every rank
  // measured at once: its kernel times already hold a share of the cores'
  // sharing (a GEMM of microseconds 1.3x slower than alone, attention of
  // milliseconds 2.0x, on the AMD host), which core_sharing adds again.
  bool kernels_include_sharing() const {
    return cores > 0 && kernel_ranks == 0 &&
           calibrated_ranks > core_slots(cores, calibrated_threads);
  }

  double usable_memory() const { return memory_bytes - reserved_bytes; }
  double achieved_memory_bandwidth() const { return memory_bandwidth * memory_efficiency; }
  // A memory-bound Backend call `kernel` over `elements` elements moving
  // `bytes`: its [kernels] rate, else the bytes at the achieved bandwidth.
  double kernel_seconds(std::string_view kernel, double elements, double bytes) const {
    if (elements <= 0 && bytes <= 0) return 0;
    const double rate = kernel_rate(kernel_rates, kernel);
    return rate > 0 ? rate * elements : bytes / achieved_memory_bandwidth();
  }
  // The dense peak of one precision.
  // The largest fraction of peak_flops_fp8 an FP8 GEMM reaches, [gemm]
  // max_efficiency_fp8 (default max_efficiency).
  double gemm_max_efficiency_fp8 = 0;
  // The FLOP/s a precision's tensor-core work runs at through a training
  // step: the dense peak at the sustained clock (peak_flops stays the
  // datasheet figure, the denominator of MFU).
  double sustained_peak_flops(tessera::Precision p) const { return peak_flops(p) * sustained_clock; }
  double peak_flops(tessera::Precision p) const {
    return p == tessera::Precision::Fp32   ? peak_flops_32
           : p == tessera::Precision::Bf16 ? peak_flops_bf16
                                           : peak_flops_fp16;
  }
};

// Parse one system file. Throws tessera::Error naming the file and field.
SystemSpec load_system_file(const std::string& path);
// The same from TOML text (`name` stands for the file in messages).
SystemSpec load_system_text(const std::string& text, const std::string& name);
// A name ("frontier") or a path to a .toml file. A name is looked up first
// among this user's calibrations (user_systems_dir(): what `tessera
// calibrate` writes, so `--system local` means this machine once measured)
// and then among the shipped files in configs/systems/.
SystemSpec load_system(const std::string& name_or_path);
// The file load_system reads for a name ("" when there is none).
std::string find_system_file(const std::string& name);
// Where `tessera calibrate` writes by default: $XDG_CACHE_HOME/tessera/systems
// (or ~/.cache/tessera/systems), never a tracked file of the checkout.
std::string user_systems_dir();
// Names of the known systems (file stems in user_systems_dir() and configs/systems/).
std::vector<std::string> list_systems();
// The configs/ directory: $TESSERA_CONFIG_DIR, ./configs, or next to the binary.
std::string config_dir();

}  // namespace tessera::plan
