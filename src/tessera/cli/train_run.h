// A `tessera train` run as the other commands read it: train's own flags
// parse its --config file (cmd_train.cpp), bridge/run_plan.h completes it for
// the planner, and `train --dry-run` prints the planner's view of it.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/train/train_config.h"

namespace tessera::cli {

// cmd_train.cpp: whether `--NAME` is a flag of `tessera train` (a key its
// --config file may hold), and the TrainConfig a `tessera train --config
// FILE` run starts from (every key the file leaves out at train's default;
// --num-layers-per-virtual-pipeline-stage applied). vocab_size_flag gets
// the file's vocab-size (0: none; train takes the data's). Throws naming
// the file and the key for a key train does not know.
bool is_train_flag(const std::string& name);
TrainConfig read_train_config(const std::string& path, int64_t* vocab_size_flag);

// A `tessera train --config` file as the planner and the tuner see it: the
// run's model (vocabulary from vocab-size, else from the run's data as train
// opens it; validated), its layout and batch, its precision. Throws naming
// the file.
TrainConfig read_planned_run(const std::string& path);

// `tessera train --dry-run`: the planner's memory per rank and step time for
// the run `c` on `ranks` ranks of `threads` threads (0: unknown), on the
// system `system` (a name or a file); a warning when that system is a
// calibration of another ranks x threads.
void print_dry_run(const TrainConfig& c, int64_t ranks, int64_t threads,
                   const std::string& system);

}  // namespace tessera::cli
