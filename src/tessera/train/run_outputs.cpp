#include "tessera/train/run_outputs.h"

#include <unistd.h>

#include <fmt/format.h>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/save_dir_owner.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/core/output_file.h"
#include "tessera/train/metrics_file.h"

namespace tessera {

std::string metrics_path_of(const TrainConfig& c, int rank) {
  std::string path = c.metrics_file;
  const size_t at = path.find("{rank}");
  if (at != std::string::npos)
    path.replace(at, 6, std::to_string(rank));
  else if (rank != 0)
    return "";
  return path;
}

namespace {

ckpt::SaveDirLock lock_for_rank0(const TrainConfig& c) {
  check_output_dir(c.save_dir, "--save", fmt::format("{}-rank0", ::getpid()));
  return ckpt::SaveDirLock(c.save_dir, "--save");
}

}  // namespace

void SaveDirClaim::before_mpi(const TrainConfig& c, const comm::LaunchRank& at) {
  if (c.save_dir.empty()) return;
  if (!at.named) {
    ckpt::check_no_writer(c.save_dir, "--save");  // throws: no rank to tell yet
    return;
  }
  if (at.rank != 0) return;
  try {
    lock = lock_for_rank0(c);
  } catch (const Error& e) {
    error = e.what();  // the other ranks hear of it in take()'s agree()
  }
}

void SaveDirClaim::take(const TrainConfig& c, int rank) {
  if (c.save_dir.empty() || rank != 0) return;
  if (!error.empty()) throw Error(error);
  if (!lock.held()) lock = lock_for_rank0(c);
}

void check_run_outputs(const TrainConfig& c, int rank) {
  if (!c.save_dir.empty()) {
    // Every rank writes its shard files into --save: every rank probes it.
    check_output_dir(c.save_dir, "--save", fmt::format("{}-rank{}", ::getpid(), rank));
    if (c.finetune) ckpt::check_finetune_save_dir(c.save_dir, c.load_dir);
    ckpt::check_save_dir_owner(c.save_dir, c.load_dir, c.overwrite_save);
    // Every save copies the tokenizer into the checkpoint: its files must be there.
    if (rank == 0)
      ckpt::check_tokenizer_sources(
          ckpt::RunInfo{c.model, c.par, c.tokenizer, c.vocab_file, c.merge_file});
  }
  if (const std::string m = metrics_path_of(c, rank); !m.empty()) {
    check_output_file(m, "--metrics-file");
    // A resumed run appends to it (metrics_file.h): it must be JSONL.
    if (!c.load_dir.empty()) metrics_lines_kept(m, INT64_MAX);
  }
  if (!c.trace_file.empty() && rank == 0) check_output_file(c.trace_file, "--trace");
  if (!c.tensorboard_dir.empty() && rank == 0)
    check_output_dir(c.tensorboard_dir, "--tensorboard-dir", fmt::format("{}", ::getpid()));
}

std::string claim_save_dir(const TrainConfig& c) {
  if (c.save_dir.empty() || !c.overwrite_save) return "";
  const int64_t n = ckpt::remove_foreign_steps(c.save_dir, c.load_dir);
  if (n == 0) return "";
  return fmt::format("--overwrite-save: deleted {} checkpoint(s) in {} that this run does not "
                     "continue",
                     n, c.save_dir);
}

}  // namespace tessera
