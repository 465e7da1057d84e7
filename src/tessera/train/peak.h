// The peaks a run's FLOP/s are measured against, per rank:
//   - MFU's: stated with --peak-tflops, or the CPU's theoretical peak
//     (kernels/cpu_peak.h: the rank's cores x clock x FLOPs per cycle of its
//     vector units at the run's GEMM precision) -- never a measured rate, which
//     on a loaded machine makes MFU read 92-97 %;
//   - the measured GEMM peak of `tessera bench peak` (fp32 sgemm at large
//     shapes; `bench peak --bf16` / `--fp16` the engine's 16-bit GEMM at the
//     same shapes; one JSON file holds each precision measured), reported
//     beside it as "% of measured <precision> GEMM peak": how close the step
//     comes to the best this machine's GEMM did at the run's precision.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/kernels/precision.h"

namespace tessera {

struct Peak {
  double tflops = 0;        // MFU's denominator; 0: unknown, MFU not reported
  std::string source;       // what the log says about where the number came from
  double gemm_tflops = 0;   // the measured GEMM peak; 0: none measured
  std::string gemm_source;  // where it came from
};

// Default location of the measured-peak file: $TESSERA_PEAK_FILE, else
// $XDG_CACHE_HOME/tessera/peak.json, else ~/.cache/tessera/peak.json.
std::string default_peak_file();

// MFU's peak: stated > 0 wins, otherwise the theoretical peak of `cores`
// cores at precision p. The GEMM peak: the file's figure for precision p
// (gemm_peak_key), if the file holds one.
Peak resolve_peak(double stated_tflops, const std::string& file, int64_t cores, Precision p);

// The peak file's key for precision p: "fp32_gemm_tflops", "bf16_gemm_tflops",
// "fp16_gemm_tflops".
std::string gemm_peak_key(Precision p);

// Measures the GEMM throughput of precision p (fp32: oneDNN sgemm; bf16 /
// fp16: kernels/cpu/matmul_lowp.h, 16-bit operands, fp32 accumulation) on
// training-like shapes with the current thread count; returns the best
// TFLOP/s seen.
double measure_gemm_peak(bool verbose, Precision p = Precision::Fp32);

// measure_gemm_peak, written to `file` as JSON (the file the trainer reads)
// under gemm_peak_key(p); the other precisions' figures already in the file
// are kept.
double measure_and_write_peak(const std::string& file, int threads, bool verbose,
                              Precision p = Precision::Fp32);

}  // namespace tessera
