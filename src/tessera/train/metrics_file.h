// --metrics-file: one JSON object per line (JSONL), the run header first
// (Trainer::run_header), then one line per step (step_to_json), each with
// its wall-clock time ("wall_time", seconds since the Unix epoch).
//
// A fresh run starts the file anew. A run that resumes (--load) keeps what
// the file holds up to the step it resumes from and appends after it: the
// lines of later steps, which a run that crashed after its last checkpoint
// had written, are dropped, so the file holds each step once. The header
// stays the first run's (`tessera plan --validate` reads one header).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

// The lines of an existing metrics file that a run resuming after
// `resumed_step` keeps (all but step lines with "step" > resumed_step; none
// if the file does not exist). Every non-blank line must be a JSON object:
// throws tessera::Error naming the file and the first line that is not, so
// a file that is not JSONL is never appended to.
std::vector<std::string> metrics_lines_kept(const std::string& path, int64_t resumed_step);

class MetricsFile {
 public:
  // resumed_step < 0: a fresh file (header first). Otherwise the kept lines,
  // then the header only if none was kept. Throws naming --metrics-file.
  MetricsFile(const std::string& path, int64_t resumed_step, const nlohmann::json& header);
  // One line, flushed; a failed write (a full disk) throws.
  void write(const nlohmann::json& line);
  void close();

 private:
  void check();
  std::string path_;
  std::ofstream out_;
};

// Seconds since the Unix epoch (the "wall_time" of metrics lines).
double unix_seconds();

}  // namespace tessera
