// StepStats: what one optimizer step measured. Printed as a log line, written
// as one JSONL object (for plots and `tessera plan --validate`).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "tessera/core/profile.h"

namespace tessera {

struct StepStats {
  int64_t step = 0, total_steps = 0;
  float loss = 0;
  float lr = 0;
  float grad_norm = 0;
  double seconds = 0;           // wall time of the whole step
  int64_t tokens = 0;           // tokens in the global batch
  double model_flops = 0;       // FLOPs of the step (model)
  double hardware_flops = 0;    // with recomputation
  double peak_tflops = 0;       // MFU's peak per rank (stated or theoretical); 0 when unknown
  double gemm_peak_tflops = 0;  // the measured GEMM peak per rank at `precision` (`bench peak
                                // [--bf16|--fp16]`); 0 when none
  int64_t ranks = 1;
  float valid_loss = -1;        // < 0: no evaluation this step
  double wall_time = 0;         // seconds since the Unix epoch when the step ended (evaluation included)
  double idle_fraction = -1;  // pipelined steps: PipelineStepStats::idle_fraction (< 0: none)
  std::string precision = "fp32";  // GEMM precision: fp32, bf16 (--bf16) or fp16 (--fp16)
  float loss_scale = 0;          // --fp16: the loss scale this step used (0: none)
  int64_t skipped_steps = 0;     // --fp16: overflowed (skipped) steps so far
  bool skipped = false;          // this step overflowed: no update
  // Mixture of experts (docs/moe.md), this rank's MoE layers, summed over
  // the step's micro-batches: the aux and z-losses (before their
  // coefficients, averaged over micro-batches and layers), token choices
  // dropped by the capacity, and per MoE layer (global index) the load
  // imbalance, max over mean of the tokens each expert was chosen by.
  bool moe = false;
  double moe_aux_loss = 0, moe_z_loss = 0;
  int64_t moe_dropped = 0;
  std::map<int64_t, double> moe_imbalance;
  Profile profile;              // seconds by kind of work
  // This rank's communication in the step: bytes (data size S, see
  // comm/comm_op.h) by "group/op", e.g. "tp/all_reduce".
  std::map<std::string, uint64_t> comm_bytes;
  // Seconds collectives were in flight (start to end, summed over calls);
  // compare with profile's "comm" (time the step waited on them) for the
  // share hidden behind computation.
  double comm_seconds = 0;
  // The same by kind of collective ("all_to_all", "all_reduce", ...): an
  // MoE run's expert-parallel exchange is the all_to_all (and, under the
  // allgather dispatcher, the ep group's all_gather / reduce_scatter).
  std::map<std::string, double> comm_seconds_by_op;
  uint64_t comm_total_bytes() const {
    uint64_t t = 0;
    for (const auto& [k, b] : comm_bytes) t += b;
    return t;
  }

  double tokens_per_second() const { return double(tokens) / seconds; }
  double tflops() const { return model_flops / seconds / 1e12 / double(ranks); }  // per rank
  double mfu() const { return peak_tflops > 0 ? tflops() / peak_tflops : 0; }
  // The share of the measured GEMM peak (not MFU: a measured rate, not the hardware's).
  double of_gemm_peak() const { return gemm_peak_tflops > 0 ? tflops() / gemm_peak_tflops : 0; }
};

// "step 10/200 | loss 3.1416 | lr 3.00e-04 | grad norm 0.912 | 812.3 ms | 315 tok/s | ..."
std::string format_step_line(const StepStats& s);

nlohmann::json step_to_json(const StepStats& s);

}  // namespace tessera
