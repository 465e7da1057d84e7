// calibrate_machine: the whole measurement behind `tessera calibrate`, as
// one collective call. Every rank measures at once (their contention is part
// of the numbers) and the ranks' results are averaged; ranks 0 and 1 measure
// the network. The CLI only parses flags and writes calibration_toml(result).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plan/calibrate.h"

namespace tessera::plan {

// What to measure and how thoroughly.
struct CalibrateOptions {
  // Models whose training GEMMs to measure (presets or .toml); the first one
  // also gives the shapes of attention, the kernels and the in-situ step.
  std::vector<std::string> models;
  std::vector<int64_t> micro_batch{1, 2, 4, 8, 16}, tp{1, 2};
  double max_gflop = 4;  // skip larger grid GEMMs: the planner's nearest shape is at the plateau
  bool quick = false;    // one pass, short timings, no coarse grid (tests)
  bool grid = true;      // the coarse grid beside the models' shapes (off: a run's own)
  int passes = 5;        // interleaved passes, each measurement the median over them
  // Also the engine's GEMMs of these 16-bit precisions on the same shapes
  // ([[gemm.measured_bf16]] / [[gemm.measured_fp16]] and their peaks), on
  // whichever path the engine runs them here (kernels/cpu/matmul_lowp.h).
  // bf16 by default: plans are bf16 unless asked.
  // Each also gets its own in-situ step ([in_situ_bf16] / [in_situ_fp16]).
  std::vector<Precision> lowp{Precision::Bf16};
  // The kernels measured (attention and the memory-bound calls); null: the
  // CPU backend. A backend must outlive the calibration.
  const kernels::Backend* backend = nullptr;
};

// Distinct shapes of the training steps of the models, plus (unless quick) a
// coarse grid so that the planner's nearest-shape lookup has neighbours for
// other models.
std::vector<CalibShape> calibration_shapes(const CalibrateOptions& o);

// The CPU's model name from /proc/cpuinfo ("CPU" if absent).
std::string cpu_name();
// The memory this process may use: the machine's, or the container's limit.
double machine_memory_bytes();

// Collective over `world`: measures everything and returns the calibration
// every rank agrees on. Rank 0 prints one progress line per measurement.
Calibration calibrate_machine(comm::Communicator& world, const CalibrateOptions& o);

}  // namespace tessera::plan
