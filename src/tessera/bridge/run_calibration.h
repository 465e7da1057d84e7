// The `local` system for one `tessera train` run: this machine measured at
// the run's ranks x threads over the run's own training shapes, cached.
//
// Why: a calibration is only as good as its match to the run. The shipped
// configs/systems/local.toml was taken on one machine at 2 ranks x 1
// thread; the README's main job runs 1 rank x 2 threads (2.3x the speed
// per rank), and the next machine may be another CPU altogether. So `plan
// --config` and `train --dry-run` on system `local` first look for a
// calibration of exactly this run (CPU, ranks, threads, model, micro-batch,
// tp) in user_systems_dir()/runs/, and measure one when there is none and
// the run is one rank: `tessera calibrate`'s passes, in this process, with
// the run's threads, over the run's GEMM shapes only (about 15 s on 2
// cores, with progress). A run of several ranks needs them measured at once
// (their contention is part of the numbers), so it gets the command that
// makes its calibration instead.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/config/gpt_config.h"
#include "tessera/plan/system.h"

namespace tessera::bridge {

struct RunShape {
  GPTConfig model;
  int64_t micro_batch = 1, tp = 1;
  int64_t ranks = 1;    // the job's ranks, all on this machine
  int64_t threads = 0;  // per rank; 0: the engine's default (cores / ranks)
  // A --bf16 or --fp16 run: its 16-bit GEMMs are measured too.
  Precision precision = Precision::Fp32;
};

// The threads a rank of `ranks` runs by default: this machine's cores
// shared equally (tessera train's --threads default), at least 1.
int64_t default_threads(int64_t ranks);

// The cache file of this run's calibration (it may not exist).
std::string run_calibration_file(const RunShape& run);

// The calibration for the run: cached, or measured now when the run is one
// rank. nullopt for a run of several ranks with none cached; `advice` then
// says how to make it (the calibrate command).
std::optional<plan::SystemSpec> run_calibration(const RunShape& run, std::string* advice);

// `sys` (the `local` file) becomes this run's calibration: cached, or
// measured now for a one-rank run, unless the environment sets
// TESSERA_RUN_CALIBRATION=0 (the tests, whose numbers must not depend on
// this machine's speed). Otherwise it stays, and a note on stderr says how
// to calibrate the run. What it did goes to stderr: stdout may be JSON.
void use_run_calibration(plan::SystemSpec& sys, const RunShape& run);

}  // namespace tessera::bridge
