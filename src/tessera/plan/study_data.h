// The published numbers of the study `tessera plan --study` reproduces, read
// from configs/studies/<name>.toml (found as configs/systems are, through
// config_dir()) so that the paper's constants are data, not code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::plan {

// A layout the study ran and the throughput it published.
struct PublishedRun {
  std::string model;
  int64_t tp = 1, pp = 1, dp = 1, global_batch = 1;
  double percent_of_peak = 0;
};

// The run in the authors' log, with what it measured.
struct MeasuredRun {
  PublishedRun layout;  // percent_of_peak unused
  int64_t gcds = 0;
  double step_seconds = 0, resident_state_gb = 0, stage0_peak_gb = 0, drop_per_stage_gb = 0;
  double bytes_per_param = 0;  // the study's own estimate of resident state
};

// One scaling series: the layout, data-parallel sizes, and the efficiency
// the study reports at the largest.
struct ScalingSeries {
  std::string model;
  int64_t tp = 1, pp = 1;
  std::vector<int64_t> dps;
  int64_t batch = 0;  // weak: per replica; strong: global
  bool weak = true;
  double study_efficiency = 0;
};

// The report's prose, from the file's [text] table: fmt format strings
// whose {} the planner's numbers fill, in the order study.cpp passes them.
struct StudyText {
  std::string header, throughput_intro, reading, measured_intro, state_row, drop_row,
      scaling_intro, scaling_outro;
};

// A public microbenchmark that decides between the readings ([evidence]):
// the best GEMM one device reaches, and where that number comes from.
struct StudyEvidence {
  double gemm_best_tflops = 0;
  std::string gemm_source;
};

struct StudyData {
  double peak_tflops_a = 0, peak_tflops_b = 0;  // the two readings of "% of peak"
  StudyEvidence evidence;
  StudyText text;
  std::vector<PublishedRun> published;
  MeasuredRun measured;
  std::vector<ScalingSeries> scaling;
};

// Throws tessera::Error naming the file and the missing or malformed key.
StudyData load_study(const std::string& name = "dash2024");

}  // namespace tessera::plan
