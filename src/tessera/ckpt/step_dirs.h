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

// Delete staging (".step_*.tmp-*") and moved-aside (".step_*.old-*")
// directories: what a crash in the middle of a save leaves behind.
void remove_stale_staging(const std::string& root);

// Keep the newest `keep` step directories (keep <= 0: all); never `protect`.
void prune_steps(const std::string& root, int keep, int64_t protect);

}  // namespace tessera::ckpt
