// The peak FLOP/s that MFU divides by: measured on this machine by
// `tessera bench peak` (fp32 sgemm at large shapes, written to a JSON file)
// or stated by the user. Never a guessed constant.
#pragma once
#include <string>

namespace tessera {

struct Peak {
  double tflops = 0;   // 0: unknown, MFU not reported
  std::string source;  // what the log says about where the number came from
};

// Default location of the measured-peak file: $TESSERA_PEAK_FILE, else
// $XDG_CACHE_HOME/tessera/peak.json, else ~/.cache/tessera/peak.json.
std::string default_peak_file();

// stated > 0 wins; otherwise the file (if present); otherwise unknown.
Peak resolve_peak(double stated_tflops, const std::string& file);

// Measures fp32 sgemm throughput on training-like shapes with the current
// thread count; returns the best TFLOP/s seen.
double measure_gemm_peak(bool verbose);

// measure_gemm_peak, written to `file` as JSON (the file the trainer reads).
double measure_and_write_peak(const std::string& file, int threads, bool verbose);

}  // namespace tessera
