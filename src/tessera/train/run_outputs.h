// The files a training run writes (--save, --metrics-file, --trace,
// --tensorboard-dir),
// checked before step 1 so that a long run cannot train for hours and then
// fail with nothing saved.
#pragma once
#include <string>

#include "tessera/ckpt/save_dir_owner.h"
#include "tessera/train/train_config.h"

namespace tessera {

// --metrics-file with "{rank}" replaced by the rank ("" when this rank
// writes no metrics: without "{rank}" only rank 0 writes).
std::string metrics_path_of(const TrainConfig& c, int rank);

// On every rank, before anything collective (bad input: tessera::Error
// naming the flag): --save can be created and written by this rank and
// holds no other run's checkpoints (ckpt/save_dir_owner.h; --overwrite-save
// allows them); this rank's --metrics-file and (rank 0) --trace can be
// opened for writing, and (rank 0) --tensorboard-dir created and written.
void check_run_outputs(const TrainConfig& c, int rank);

// First thing a training run does with --save, before the data is opened:
// on rank 0, the directory is made and its writer lock taken
// (ckpt::SaveDirLock), so a second run into a directory being written is
// refused at once. Keep the lock for the run's life (empty on other ranks
// and without --save).
[[nodiscard]] ckpt::SaveDirLock lock_save_dir(const TrainConfig& c, int rank);

// Rank 0, after every rank passed check_run_outputs: with --overwrite-save,
// delete the other run's checkpoints in --save. Returns a line for the log
// ("" when nothing was deleted).
std::string claim_save_dir(const TrainConfig& c);

}  // namespace tessera
