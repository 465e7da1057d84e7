#include "tessera/train/metrics_file.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/core/output_file.h"

namespace tessera {

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::vector<std::string> metrics_lines_kept(const std::string& path, int64_t resumed_step) {
  std::vector<std::string> kept;
  std::ifstream in(path);
  if (!in) return kept;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      fail("--metrics-file {}: line {} is not JSON (not a metrics file written by `tessera "
           "train`?); not appending to it",
           path, n);
    }
    TESSERA_CHECK(j.is_object(),
                  "--metrics-file {}: line {} is not a JSON object; not appending to it", path, n);
    const auto step = j.find("step");
    if (step != j.end() && step->is_number_integer() && step->get<int64_t>() > resumed_step)
      continue;  // written after the checkpoint we resume from: done again now
    kept.push_back(line);
  }
  return kept;
}

MetricsFile::MetricsFile(const std::string& path, int64_t resumed_step,
                         const nlohmann::json& header)
    : path_(path) {
  create_parent_dirs(path, "--metrics-file");
  // A device or a pipe (/dev/stdout, a FIFO a monitor reads) is written
  // through: never read back for kept lines (a pipe would block), never
  // replaced by a rename.
  struct stat st {};
  const bool regular = ::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode);
  std::vector<std::string> kept;
  if (resumed_step >= 0 && regular) kept = metrics_lines_kept(path, resumed_step);
  bool has_header = false;
  for (const std::string& line : kept)
    has_header = has_header || nlohmann::json::parse(line).contains("run");
  if (!kept.empty()) {
    // The kept lines go to a new file that replaces the old one whole: a
    // crash here leaves the old file, never half of it.
    std::string text;
    for (const std::string& line : kept) text += line + "\n";
    write_output_file(path, text, "--metrics-file");
    out_.open(path, std::ios::app);
  } else if (regular) {
    out_.open(path, std::ios::trunc);
  } else {
    out_.open(path, std::ios::app);  // through the device, no truncation asked of it
  }
  TESSERA_CHECK(bool(out_), "--metrics-file {}: cannot open for writing", path);
  if (!has_header) out_ << header.dump() << "\n" << std::flush;
  check();
}

void MetricsFile::write(const nlohmann::json& line) {
  out_ << line.dump() << "\n" << std::flush;
  check();
}

void MetricsFile::close() {
  out_.close();
  check();
}

void MetricsFile::check() {
  TESSERA_CHECK(bool(out_), "--metrics-file {}: write failed (disk full?)", path_);
}

}  // namespace tessera
