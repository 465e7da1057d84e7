// Reading a `tessera train --metrics-file` JSONL file back: the run header
// (model, layout, measured memory) and each step's wall time, for
// `tessera plan --validate`, and each step's loss and throughput, for
// `tessera plot`.
//
// Expected format (docs/planner.md, "Metrics files"): the first line is
//   {"run": {"model": {...model_to_json...},
//            "parallel": {...parallel_to_json... (no "schedule": 1f1b; no "cp": 1)},
//            "memory_bytes": {"params": P, "grads": G, "optimizer": O, "activations": A},
//            "threads": N, "system": "local"}}
// ("memory_bytes" may also be a list with one such object per rank; the
// largest total is the run's peak), then one step_to_json object per line.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/profile.h"
#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"
#include "tessera/parallel/memory_bytes.h"

namespace tessera::plan {

struct RunMetrics {
  std::string path;
  GPTConfig model;
  ParallelConfig par;
  int threads = 0;                     // 0: not recorded
  int64_t rank = 0;                    // the world rank that wrote the file
  std::string system;                  // as recorded ("" if absent)
  std::string precision = "fp32";      // "fp32", "bf16" or "fp16" (older files: fp32)
  bool overlap_grad_reduce = false;    // --overlap-grad-reduce (older files: off)
  bool overlap_param_gather = false;   // --overlap-param-gather (older files: off)
  std::optional<MemoryBytes> memory;  // the rank with the largest total
  std::vector<int64_t> steps;          // step numbers, file order
  std::vector<double> step_seconds;    // wall time of each
  std::vector<Profile> step_ops;       // each step's "seconds_by_op" (zeros when absent)
  // Curves for `tessera plot`, one entry per step (NaN where a line lacks it).
  std::vector<double> loss, valid_loss, tokens, tokens_per_second, mfu;
  // An MoE run's load imbalance per step: the worst MoE layer's max / mean
  // tokens per expert (train/moe_metrics.h; NaN where a line has none).
  std::vector<double> moe_imbalance;
};

// Parses one file. Throws tessera::Error naming the file and line for a
// missing header, a malformed line or a file without steps.
RunMetrics read_run_metrics(const std::string& path);

// Throws unless `r` has steps left after the first `skip` (warm-up).
void check_enough_steps(const RunMetrics& r, size_t skip);

// Median step time after dropping the first `skip` steps (warm-up: page
// faults, oneDNN's kernel choice, thread start). Throws when none are left.
double median_step_seconds(const RunMetrics& r, size_t skip);
// The median of each kind of work over the same steps (kind by kind).
Profile median_step_ops(const RunMetrics& r, size_t skip);

// The median of the steps' MoE imbalance after the first `skip`; 0 when
// the run has none (a dense model, or an older file).
double median_moe_imbalance(const RunMetrics& r, size_t skip);

// Repeats of one layout (same model, layout, rank) as one run: every file's
// steps after its first `skip`, in file order, so a median over them spans
// the repeats (taken at different times on a shared machine). The result
// has no warm-up steps left; its path names the first file and the count.
RunMetrics pool_runs(const std::vector<RunMetrics>& repeats, size_t skip);

}  // namespace tessera::plan
