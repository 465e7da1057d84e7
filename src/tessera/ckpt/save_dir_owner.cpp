#include "tessera/ckpt/save_dir_owner.h"

#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;

namespace {

// An absolute path without "." / ".." / symlinks / a trailing "/", so that
// "ckpt", "./ckpt/" and "/abs/ckpt" compare equal.
fs::path normalized(const std::string& p) {
  std::error_code ec;
  fs::path n = fs::weakly_canonical(fs::absolute(p), ec);
  if (ec) n = fs::absolute(p).lexically_normal();
  if (n.filename().empty()) n = n.parent_path();
  return n;
}

// How the run relates to save_dir: not resuming from it (nullopt), resuming
// from its latest (-1), or from its step N (N).
std::optional<int64_t> resume_point(const std::string& save_dir, const std::string& load_dir) {
  if (load_dir.empty()) return std::nullopt;
  const fs::path save = normalized(save_dir), load = normalized(load_dir);
  if (load == save) return -1;
  if (load.parent_path() == save)
    if (auto step = parse_step_dir(load.filename().string())) return *step;
  return std::nullopt;
}

std::string describe(const std::vector<std::pair<int64_t, std::string>>& steps) {
  const std::string newest = fs::path(steps.front().second).filename().string();
  return steps.size() == 1 ? newest
                           : fmt::format("{} steps, the newest {}", steps.size(), newest);
}

}  // namespace

std::vector<std::pair<int64_t, std::string>> foreign_steps(const std::string& save_dir,
                                                           const std::string& load_dir) {
  auto steps = list_steps(save_dir);  // newest first
  const std::optional<int64_t> from = resume_point(save_dir, load_dir);
  if (!from) return steps;
  if (*from < 0) return {};
  std::vector<std::pair<int64_t, std::string>> newer;
  for (const auto& s : steps)
    if (s.first > *from) newer.push_back(s);
  return newer;
}

void check_save_dir_owner(const std::string& save_dir, const std::string& load_dir,
                          bool overwrite) {
  if (overwrite) return;
  const auto foreign = foreign_steps(save_dir, load_dir);
  if (foreign.empty()) return;
  if (resume_point(save_dir, load_dir))
    fail("--save {} holds checkpoints newer than --load {} ({}): this run would replace them "
         "step by step; pass --overwrite-save to delete them first, or save elsewhere",
         save_dir, load_dir, describe(foreign));
  fail("--save {} already holds another run's checkpoints ({}): resume that run with --load {}, "
       "pass --overwrite-save to delete them, or choose another directory",
       save_dir, describe(foreign), save_dir);
}

void check_finetune_save_dir(const std::string& save_dir, const std::string& load_dir) {
  if (!resume_point(save_dir, load_dir)) return;
  const auto steps = list_steps(save_dir);  // newest first
  TESSERA_CHECK(steps.empty() || steps.front().first == 0,
                "--save {} is where --finetune loads from, and it holds a run's checkpoints ({}): "
                "the fine-tune starts again at step 1 and would write among them; save elsewhere",
                save_dir, describe(steps));
}

int64_t remove_foreign_steps(const std::string& save_dir, const std::string& load_dir) {
  const auto foreign = foreign_steps(save_dir, load_dir);
  if (foreign.empty()) return 0;
  // `latest` first: from here on no reader resolves to a step being deleted.
  const fs::path latest = fs::path(save_dir) / kLatestFile;
  const std::optional<int64_t> from = resume_point(save_dir, load_dir);
  std::error_code ec;
  if (from && *from >= 0)
    write_file_atomic(latest.string(), normalized(load_dir).filename().string() + "\n");
  else
    fs::remove(latest, ec);
  std::vector<fs::path> trash;
  for (const auto& [step, path] : foreign) {
    const fs::path to = fs::path(save_dir) / trash_name(fs::path(path).filename().string());
    fs::rename(path, to, ec);
    TESSERA_CHECK(!ec, "--overwrite-save: cannot remove {}: {}", path, ec.message());
    trash.push_back(to);
  }
  fsync_dir(save_dir);
  for (const auto& p : trash) fs::remove_all(p, ec);
  return int64_t(foreign.size());
}

}  // namespace tessera::ckpt
