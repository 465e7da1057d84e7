// Published training runs (bench/published/*.toml) planned at exactly
// their layout: `tessera plan --validate-published PATH` compares the
// planner with what runs on real clusters measured, term by term, and the
// suite's residuals give every GPU plan its prediction interval.
// bench/published/README.md describes the file format.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/layout_cost.h"

namespace tessera::plan {

// How a source turns a step into FLOPs (its TFLOP/s or MFU figures).
enum class FlopConvention {
  Megatron2021,     // Narayanan et al. 2021 eq. 3, full recompute: 96 B s l h^2 (1 + s/6h + V/16lh)
  MegatronModel,    // model FLOPs, no recompute: 72 B s l h^2 (1 + s/6h + V/12lh)
  SixND,            // 6 N T
  SixNDAttn,        // 6 N T + 12 l h s T (PaLM, llm-foundry)
  SixNDNoEmbedAttn  // 6 (N - V h) T + 12 l h s T (torchtitan: no token embedding)
};
FlopConvention flop_convention_parse(const std::string& name, const std::string& where);
// FLOPs of one step of `global_batch` sequences as the convention counts them.
double convention_flops(FlopConvention c, const GPTConfig& m, int64_t global_batch);

struct PublishedRun {
  // [source]
  std::string source, citation, stack, date, file;
  // [[run]]
  std::string name, system, model_name;
  GPTConfig model;
  PlanLayout layout;
  std::vector<std::string> inferred;  // keys the source does not state
  double published_step = 0;          // seconds, from the measured figure
  std::string measured;               // the figure as the file gives it ("tflops-per-device 138")
  double memory_gb = 0;               // per device, where the source states it (0: not)
  // Why the step cannot be the stated layout's (figures that contradict each
  // other or the hardware): the row is planned and shown, its memory
  // compared, but its step error counts in no summary and no interval.
  // Empty: counted.
  std::string excluded;

  // "fsdp" (ZeRO-3), "tp+pp", "pp", "tp" or "dp": the kind of layout the
  // residuals are grouped by.
  std::string kind() const;
};

// "fsdp" (ZeRO-3 over dp > 1), "tp+pp", "pp", "tp" or "dp".
std::string layout_kind(const PlanLayout& layout);

// One file, or every *.toml under a directory (sorted). Each error names the
// file and the run.
std::vector<PublishedRun> load_published(const std::string& path);

// A step by the terms the issue names, seconds (they sum to the step).
struct StepTerms {
  double gemm = 0, attention = 0, memory_bound = 0, tp_comm = 0, pp_bubble = 0,
         dp_exposed = 0, optimizer = 0, other = 0;
};
StepTerms step_terms(const LayoutCost& c);

struct PublishedCheck {
  PublishedRun run;
  LayoutCost cost;
  double error = 0;  // predicted / published step - 1: below 0, the planner is optimistic
  StepTerms terms;
};

struct ErrorSummary {
  size_t n = 0;
  double mape = 0, max_abs = 0, mean_signed = 0;  // fractions
};
ErrorSummary summarize(const std::vector<double>& errors);

struct PublishedValidation {
  std::vector<PublishedCheck> rows;
  ErrorSummary all;
  std::map<std::string, ErrorSummary> by_source, by_kind, by_system;
};

// Plans every run on its system (configs/systems/NAME) at its layout.
PublishedValidation validate_published(const std::vector<PublishedRun>& runs);
std::string format_published(const PublishedValidation& v);

// The spread of published / predicted step over the suite's runs of one
// kind of layout (all runs when that kind has fewer than 5): a plan's step
// lies in [low, high] x its prediction for 80 % of the suite.
struct PredictionInterval {
  double low = 1, high = 1;  // 10th and 90th percentile of published / predicted
  size_t runs = 0;
  std::string kind;          // the kind it was taken over ("all" when pooled)
};
PredictionInterval prediction_interval(const PublishedValidation& v, const std::string& kind);
// The shipped suite (config_dir()/../bench/published), validated once per
// process; null when it is not there.
const PublishedValidation* shipped_published_validation();
// The line a GPU plan prints under its step: the prediction interval of its
// kind of layout from the shipped suite ("" on a CPU system or without it).
std::string interval_text(const LayoutCost& c, const SystemSpec& sys);

}  // namespace tessera::plan
