// Whose checkpoints a --save directory holds. A training run writes into a
// directory that is empty of checkpoints, or that it resumes from; anything
// else would mix two runs' histories: the new run overwrites the old run's
// steps as it reaches them, `latest` jumps between them, and --save-keep
// prunes by step number across both (deleting the new run's history while
// keeping the old run's higher steps).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::ckpt {

// The one writer of a --save directory. Two runs saving into one directory
// would both pass the checks below (each sees it empty) and then replace
// each other's steps and `latest`; so the writing run holds an exclusive
// flock on DIR/.tessera-writer.lock for its whole life. The kernel drops the
// lock when the process ends however it ends (a kill -9 included), so a
// lock file left by a dead run never blocks the next one. Readers (eval,
// export, generate, a --load of the directory) never take it.
class SaveDirLock {
 public:
  SaveDirLock() = default;
  // Creates save_dir if missing. Throws tessera::Error "FLAG DIR is being
  // written by pid N on HOST" without waiting when another live process
  // holds the directory; `flag` names the option ("--save", "--output").
  SaveDirLock(const std::string& save_dir, const char* flag);
  ~SaveDirLock();
  SaveDirLock(SaveDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  SaveDirLock& operator=(SaveDirLock&& o) noexcept;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

inline constexpr const char* kWriterLockFile = ".tessera-writer.lock";

// Throws the error SaveDirLock would ("FLAG DIR is being written by pid N on
// HOST") when a live process holds save_dir's writer lock; otherwise
// returns, holding nothing and creating nothing. It takes a shared lock for
// a moment, so several processes may look at once without seeing each
// other: what a process can check before it knows whether it is the rank
// that writes.
void check_no_writer(const std::string& save_dir, const char* flag);

// Committed steps under save_dir that are not this run's to continue,
// newest first: (step, path).
// - load_dir is save_dir itself (resume from its `latest`): none; steps past
//   `latest` are this run's own leftovers (a save killed before `latest`
//   moved) and are replaced as the run reaches them.
// - load_dir is a step directory inside save_dir (a rewind to step N): the
//   steps newer than N, whose future this run replaces.
// - otherwise (no --load, or another directory): every step.
std::vector<std::pair<int64_t, std::string>> foreign_steps(const std::string& save_dir,
                                                           const std::string& load_dir);

// Throws tessera::Error naming --save unless foreign_steps is empty or
// `overwrite` (--overwrite-save) is set.
void check_save_dir_owner(const std::string& save_dir, const std::string& load_dir,
                          bool overwrite);

// --finetune restarts at step 1: its steps would land among those of the
// run it loads when --save is that run's directory. Throws tessera::Error
// naming --save when load_dir is save_dir or one of its steps and save_dir
// holds any step >= 1 (an import's step 0 alone is fine).
void check_finetune_save_dir(const std::string& save_dir, const std::string& load_dir);

// --overwrite-save, on the one rank that writes (rank 0): delete the
// foreign steps (each renamed to trash first, so a kill leaves no
// half-deleted loadable step) and point `latest` at the resumed step, or
// remove it when nothing of this run is left. Returns how many were deleted.
int64_t remove_foreign_steps(const std::string& save_dir, const std::string& load_dir);

}  // namespace tessera::ckpt
