// The step directories under a checkpoint root: listing, `latest`,
// pruning, and leftovers of interrupted saves.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::ckpt {

// Step number of a committed directory name ("step_000100" -> 100), or
// nullopt for anything else (staging ".step_000100.tmp-123", files).
std::optional<int64_t> parse_step_dir(const std::string& name);

// Committed step directories under root, newest first: (step, path).
std::vector<std::pair<int64_t, std::string>> list_steps(const std::string& root);

// The directory name `latest` names ("" when absent or unreadable).
std::string read_latest(const std::string& root);

// Delete what an interrupted save or prune leaves behind: staging
// (".step_*.tmp-*"), moved-aside (".step_*.old-*") and trash (".trash-*")
// directories, and `latest.tmp-*` files. Run by the writer before its first
// save (begin_staging), never by readers: a reader must not delete a live
// run's staging directory.
void remove_stale_staging(const std::string& root);

// Keep the newest `keep` step directories (keep <= 0: all); never `protect`.
// Each is first renamed to a hidden trash name (one atomic step: it stops
// being a loadable step at once), then deleted; a kill during the delete
// leaves only trash, which the next save removes.
void prune_steps(const std::string& root, int keep, int64_t protect);

// ".trash-step_000100-<pid>": what prune_steps renames a step to.
std::string trash_name(const std::string& step_dir_name);

}  // namespace tessera::ckpt
