// The cost of one layout: memory per pipeline stage and the time of one
// optimizer step, broken down so a report can say what limits it.
#pragma once
#include <string>
#include <vector>

#include "tessera/core/profile.h"
#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/param_counter.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

struct StageCost {
  int64_t stage = 0;
  int64_t params = 0;          // this rank's parameters (tp rank 0)
  MemoryBytes state;           // weights, grads, optimizer after ZeRO (activations 0: below)
  double activations = 0;      // bytes at the activation peak
  double layer_activations = 0;  // of which transformer layers (Korthikanti's Fig. 1 quantity)
  double zero3_buffers = 0;    // gathered weights of the chunk in use (ZeRO-3)
  int64_t in_flight = 0;       // micro-batch chunks held at the peak
  // One step on a rank of this stage by kind of work, as the engine's
  // profile names it (`seconds_by_op` of its metrics): compute, its exposed
  // collectives as Op::Comm. Pipeline idle time (bubble) is not in it.
  Profile ops;
  double memory() const { return state.total() + activations + zero3_buffers; }
};

// Seconds, per step unless said otherwise.
struct StepBreakdown {
  double step = 0;             // what one optimizer step takes
  double pipeline = 0;         // first forward to last backward (with bubble)
  double compute = 0;          // the busiest rank's forward + backward compute
  double tp_comm = 0;          // its tensor-parallel collectives (not overlapped)
  // its context-parallel K/V exchange that waits: the ring steps the
  // attention beside them does not cover, or the all_gather variant's
  // collectives (context_parallel_cost.h)
  double cp_comm = 0;
  // its ZeRO-3 weight gathers that wait (all of them in the engine; in a GPU
  // framework what compute does not hide, its per-micro-batch gradient
  // reduce-scatters included)
  double zero3_gather = 0;
  double bubble = 0;           // pipeline - busiest rank's busy time
  double bubble_fraction = 0;  // Narayanan et al.'s (p - 1)/(v m) in the uniform case
  double p2p = 0;              // one activation message between stages
  double dp_reduce = 0;        // data-parallel gradient reduction (+ ZeRO gathers)
  double dp_exposed = 0;       // the part not hidden behind the last backward
  double embedding_sync = 0;   // tied-embedding gradient sum, first <-> last stage
  double optimizer = 0;        // the optimizer step and gradient norm (memory bound)
  double sync_wait = 0;        // waiting for late ranks: system sync_wait x blocking syncs
  double core_sharing = 0;     // CPU: ranks sharing a core run in turn (core_sharing())
  double straggler = 0;        // the slowest of the job's devices pacing the step (straggler.h)
  bool simulated = false;      // pipeline from the engine's schedule, not the closed form
};

struct LayoutCost {
  PlanLayout layout;
  std::vector<StageCost> stages;  // every stage (or first and last when screening)
  double peak_memory = 0;
  int64_t peak_stage = 0;
  bool fits = true;
  double over_memory = 0;         // bytes the peak stage needs beyond usable memory (0: fits)
  std::string why_not;            // when it does not fit (or is invalid)
  StepBreakdown time;
  double tokens_per_second = 0;
  double model_flops = 0, hardware_flops = 0;  // per step (flops.h)
  double mfu = 0, hfu = 0;                     // of the device peak for the precision
  double tflops_per_device = 0;                // model FLOP/s per device
  std::string limiter;            // what the step time is mostly made of
};

struct CostOptions {
  bool simulate_schedule = true;  // false: closed-form pipeline time (search screening)
  bool all_stages = true;         // false: first and last stage only
};

// Throws tessera::Error for an invalid layout (heads % tp, layers % (p v), ...).
LayoutCost evaluate_layout(const GPTConfig& model, const SystemSpec& sys, const PlanLayout& L,
                           ParamCounter& params, const CostOptions& opt = {});
LayoutCost evaluate_layout(const GPTConfig& model, const SystemSpec& sys, const PlanLayout& L,
                           const CostOptions& opt = {});

// Activation bytes of pipeline stage `stage` (transformer layers only, and
// everything), per the precision's model: Korthikanti for mixed precision,
// the engine's fp32 arena for fp32.
struct StageActivations {
  double layers = 0, total = 0;
  int64_t in_flight = 0;
};
StageActivations stage_activations(const GPTConfig& model, const PlanLayout& L, int64_t stage);

}  // namespace tessera::plan
