#include "tessera/ckpt/step_dirs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <unistd.h>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;

std::optional<int64_t> parse_step_dir(const std::string& name) {
  const std::string prefix = "step_";
  if (!name.starts_with(prefix) || name.size() == prefix.size() || name.size() > prefix.size() + 18)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

std::vector<std::pair<int64_t, std::string>> list_steps(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(root, ec)) {
    auto step = parse_step_dir(de.path().filename().string());
    if (step && de.is_directory()) out.emplace_back(*step, de.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

std::string read_latest(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(fs::path(root) / kLatestFile, ec)) return "";
  try {
    std::string s = read_file((fs::path(root) / kLatestFile).string());
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    return s;
  } catch (...) {
    return "";
  }
}

namespace {

bool is_leftover(const std::string& n) {
  if (n.starts_with(".trash-")) return true;
  if (n.starts_with(std::string(kLatestFile) + ".tmp-")) return true;
  return n.starts_with(".step_") &&
         (n.find(".tmp-") != std::string::npos || n.find(".old-") != std::string::npos);
}

}  // namespace

void remove_stale_staging(const std::string& root) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& de : fs::directory_iterator(root, ec))
    if (is_leftover(de.path().filename().string())) stale.push_back(de.path());
  for (const auto& p : stale) fs::remove_all(p, ec);
}

std::string trash_name(const std::string& step_dir_name) {
  return ".trash-" + step_dir_name + "-" + std::to_string(::getpid());
}

void prune_steps(const std::string& root, int keep, int64_t protect) {
  if (keep <= 0) return;
  auto steps = list_steps(root);  // newest first
  std::error_code ec;
  std::vector<fs::path> trash;
  for (size_t i = size_t(keep); i < steps.size(); ++i) {
    if (steps[i].first == protect) continue;
    const fs::path from(steps[i].second);
    const fs::path to = from.parent_path() / trash_name(from.filename().string());
    fs::rename(from, to, ec);
    if (!ec) trash.push_back(to);
  }
  if (trash.empty()) return;
  // The renames are made durable before the slow deletes start. The new
  // checkpoint is already committed, so a failure here only risks a step
  // reappearing after a crash; it is not worth failing the save for.
  try {
    fsync_dir(root);
  } catch (const Error&) {
  }
  for (const auto& p : trash) fs::remove_all(p, ec);
}

}  // namespace tessera::ckpt
