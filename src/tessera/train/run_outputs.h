// The files a training run writes (--save, --metrics-file, --trace,
// --tensorboard-dir),
// checked before step 1 so that a long run cannot train for hours and then
// fail with nothing saved.
#pragma once
#include <string>

#include "tessera/ckpt/save_dir_owner.h"
#include "tessera/comm/launch_env.h"
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

// The one writer of --save (ckpt::SaveDirLock), claimed as early as a run
// can: a second run into a directory being written is refused before MPI
// start-up when it runs alone, and right after it (before the data opens)
// on several ranks. Keep it for the run's life.
struct SaveDirClaim {
  ckpt::SaveDirLock lock;  // held on rank 0 (none elsewhere, none without --save)
  std::string error;       // rank 0's failure before MPI started, reported by take()

  // Before MPI starts; `at` is the launcher's word on the rank
  // (comm/launch_env.h). Named rank 0: make the directory and take the lock,
  // keeping a failure for take(). Named another rank: nothing. Named by no
  // launcher (most likely started alone): throw at once if a live writer
  // holds the lock (ckpt::check_no_writer), take nothing yet.
  void before_mpi(const TrainConfig& c, const comm::LaunchRank& at);
  // Inside the first agree() after MPI start-up, on every rank: rank 0
  // throws the error kept above, or takes the lock if it does not hold it.
  void take(const TrainConfig& c, int rank);
};

// Rank 0, after every rank passed check_run_outputs: with --overwrite-save,
// delete the other run's checkpoints in --save. Returns a line for the log
// ("" when nothing was deleted).
std::string claim_save_dir(const TrainConfig& c);

}  // namespace tessera
