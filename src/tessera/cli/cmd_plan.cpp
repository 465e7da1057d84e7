// `tessera plan`: predict memory and step time of layouts of a model on a
// system, search them, and print the best (or JSON for scripts).
#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "tessera/cli/commands.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/plots.h"
#include "tessera/plan/by_op_report.h"
#include "tessera/plan/report.h"
#include "tessera/plan/search.h"
#include "tessera/plan/study.h"
#include "tessera/plan/validate.h"

namespace tessera::cli {

namespace {

struct PlanArgs {
  // system "": frontier, or local with --validate (runs of this machine).
  std::string model = "frontier-175b", system, json, sequence_parallel = "both";
  // --validate: further calibrations of the same machine (--system given
  // several times); each run's prediction is the median over all of them.
  std::vector<std::string> more_systems;
  std::string precision = "mixed16";
  int64_t devices = 0, global_batch = 0;
  int64_t top = 5;
  std::vector<int64_t> tp, pp, micro_batch, virtual_stages;
  std::vector<int> zero;
  std::vector<std::string> recompute, schedule;
  bool no_flash = false, tp_across_nodes = false, list = false, study = false;
  std::vector<std::string> validate;  // metrics files of `tessera train` runs
  bool by_op = false;                 // the best layout by op; --validate: each run by kind of work
  std::string svg_dir;                // --svg: write the charts here
};

void write_file(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  write_output_file(path, text, "--svg");
  fmt::print("wrote {}\n", path);
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::None;
  if (s == "selective") return Recompute::Selective;
  if (s == "full") return Recompute::Full;
  fail("--recompute: '{}' is not none, selective or full", s);
}

plan::SearchSpace make_space(const PlanArgs& a) {
  plan::SearchSpace sp;
  sp.devices = a.devices;
  sp.global_batch = a.global_batch;
  sp.tp = a.tp;
  sp.pp = a.pp;
  sp.micro_batch = a.micro_batch;
  sp.virtual_stages = a.virtual_stages;
  if (!a.zero.empty()) sp.zero_stages = a.zero;
  if (!a.recompute.empty()) {
    sp.recompute.clear();
    for (const auto& r : a.recompute) sp.recompute.push_back(parse_recompute(r));
  }
  if (!a.schedule.empty()) {
    sp.schedules.clear();
    for (const auto& s : a.schedule) sp.schedules.push_back(schedule_kind_parse(s));
  }
  if (a.sequence_parallel == "on") sp.sequence_parallel = {true};
  else if (a.sequence_parallel == "off") sp.sequence_parallel = {false};
  else TESSERA_CHECK(a.sequence_parallel == "both", "--sequence-parallel: on, off or both (got '{}')",
                     a.sequence_parallel);
  TESSERA_CHECK(a.precision == "mixed16" || a.precision == "fp32",
                "--precision: mixed16 or fp32 (got '{}')", a.precision);
  sp.precision = a.precision == "fp32" ? plan::Precision::FP32 : plan::Precision::Mixed16;
  sp.flash_attention = !a.no_flash;
  sp.tp_within_node = !a.tp_across_nodes;
  return sp;
}

void print_list() {
  fmt::print("systems ({}, then {}/systems):", plan::user_systems_dir(), plan::config_dir());
  for (const auto& s : plan::list_systems()) fmt::print(" {}", s);
  fmt::print("\nmodel presets:\n");
  for (const auto& p : plan::model_presets())
    fmt::print("  {:<18} L {:>3} h {:>5} heads {:>3} seq {:>4}  {:>8.2f}B params  ({})\n", p.name,
               p.config.num_layers, p.config.hidden_size, p.config.num_heads, p.config.seq_length,
               double(ParamLayout::count_model_params(p.config)) / 1e9, p.source);
}

void run_validate(const PlanArgs& a, const plan::SystemSpec& sys) {
  std::vector<plan::SystemSpec> systems{sys};
  for (const auto& s : a.more_systems) systems.push_back(plan::load_system(s));
  fmt::print("{}", plan::format_validation(plan::validate_runs(a.validate, systems), sys, a.by_op));
}

void run_study(const PlanArgs& a, const plan::SystemSpec& sys) {
  fmt::print("{}", plan::reproduce_study(sys));
  if (!a.svg_dir.empty())
    write_file(a.svg_dir, "scaling.svg",
               plan::svg_scaling(plan::study_scaling(sys),
                                 fmt::format("Dash et al. 2024 scaling on {}: planner vs study", sys.name)));
}

// Fails, saying why, when the search found no layout that fits.
void check_found(const PlanArgs& a, const GPTConfig& model, const plan::SystemSpec& sys,
                 const plan::SearchSpace& space, const plan::SearchResult& r) {
  if (r.candidates == 0) {
    auto near = plan::nearby_usable_device_counts(model, sys, space);
    std::string alt;
    for (auto n : near) alt += (alt.empty() ? "" : " or ") + std::to_string(n);
    fail("no layout of {} devices for {} with global batch {}: tp must divide the heads ({}) "
         "within a node of {}, pp the layers ({}), and dp the global batch; nearest usable "
         "device counts: {}",
         a.devices, a.model, a.global_batch, model.num_heads, sys.devices_per_node,
         model.num_layers, alt.empty() ? "none found" : alt);
  }
  if (r.ranked.empty()) {
    const plan::LayoutCost& c = r.closest_misses.front();
    fail("{} fits no layout on {} x {} ({:.1f} GB usable each): the least memory, {}, needs "
         "{:.1f} GB on stage {} (every ZeRO stage, recompute mode and micro-batch was tried). "
         "Try more devices: about {} by that layout's memory",
         a.model, a.devices, sys.device_name, sys.usable_memory() / 1e9, c.layout.str(),
         c.peak_memory / 1e9, c.peak_stage,
         int64_t(std::ceil(double(a.devices) * c.peak_memory / sys.usable_memory())));
  }
}

// --json: writes the result; true when it went to stdout (and nothing else may).
bool write_json(const PlanArgs& a, const plan::SystemSpec& sys, const plan::SearchResult& r) {
  nlohmann::json j = plan::search_json(r, size_t(a.top));
  j["model"] = a.model;
  j["system"] = sys.name;
  j["devices"] = a.devices;
  if (a.json == "-") {
    fmt::print("{}\n", j.dump(2));
    return true;
  }
  write_output_file(a.json, j.dump(2) + "\n", "--json");
  return false;
}

void print_search(const PlanArgs& a, const GPTConfig& model, const plan::SystemSpec& sys,
                  const plan::SearchResult& r) {
  fmt::print("{} ({:.2f}B parameters) on {} x {} ({}), global batch {}\n", a.model,
             double(ParamLayout::count_model_params(model)) / 1e9, a.devices, sys.device_name,
             sys.name, a.global_batch);
  fmt::print("searched {} layouts in {:.3f} s: {} fit, {} do not fit memory\n\n", r.candidates,
             r.seconds, r.ranked.size(), r.too_big);
  fmt::print("{}\n", plan::format_table(r.ranked, size_t(a.top)));
  fmt::print("best: {}", plan::format_breakdown(r.ranked.front(), sys));
  if (!r.closest_misses.empty() && r.too_big > 0) {
    // Its reason's breakdown "(weights ..., ...)" on a line of its own: the
    // output stays within 100 columns.
    std::string why = r.closest_misses.front().why_not;
    if (const size_t at = why.find(" ("); at != std::string::npos) why.replace(at, 1, "\n    ");
    fmt::print("dropped, e.g.: {}:\n  {}\n", r.closest_misses.front().layout.str(), why);
  }
}

void write_search_svgs(const PlanArgs& a, const GPTConfig& model, const plan::SystemSpec& sys,
                       const plan::SearchSpace& space, const plan::SearchResult& r) {
  const std::string what = fmt::format("{} on {} x {} ({}), global batch {}", a.model, a.devices,
                                       sys.device_name, sys.name, a.global_batch);
  write_file(a.svg_dir, "heatmap.svg",
             plan::svg_heatmap(plan::heatmap_tp_pp(model, sys, space, what)));
  // Every stage of the winner, simulated (the search may have screened it).
  const plan::LayoutCost best = plan::evaluate_layout(model, sys, r.ranked.front().layout);
  write_file(a.svg_dir, "memory.svg",
             plan::svg_memory_stages(best, sys, "Memory per pipeline stage: " + what));
}

void run_plan(const PlanArgs& a) {
  if (a.list) {
    print_list();
    return;
  }
  // Outputs are checked before the search (or the study) that fills them.
  if (!a.json.empty() && a.json != "-") check_output_file(a.json, "--json");
  if (!a.svg_dir.empty()) check_output_dir(a.svg_dir, "--svg", std::to_string(::getpid()));
  TESSERA_CHECK(a.more_systems.empty() || !a.validate.empty(),
                "--system: several system files only with --validate (one search needs one machine)");
  const std::string system_name =
      !a.system.empty() ? a.system : !a.validate.empty() ? "local" : "frontier";
  const plan::SystemSpec sys = plan::load_system(system_name);
  // A name can mean this user's calibration or the shipped file: say which
  // (on stderr, so `--json -` stays JSON).
  if (const std::string file = plan::find_system_file(system_name);
      !file.empty() && file.starts_with(plan::user_systems_dir()))
    fmt::print(stderr, "system '{}': {} (this machine's calibration)\n", system_name, file);
  if (!a.validate.empty()) {
    run_validate(a, sys);
    return;
  }
  if (a.study) {
    run_study(a, sys);
    return;
  }
  const GPTConfig model = plan::load_model(a.model);
  TESSERA_CHECK(a.devices >= 1, "--devices: how many devices to plan for (got {})", a.devices);
  TESSERA_CHECK(a.global_batch >= 1, "--global-batch-size: sequences per step (got {})",
                a.global_batch);
  TESSERA_CHECK(a.top >= 1, "--top must be >= 1 (got {})", a.top);
  const plan::SearchSpace space = make_space(a);
  plan::SearchResult r = plan::search_layouts(model, sys, space);
  check_found(a, model, sys, space, r);
  if (!a.json.empty() && write_json(a, sys, r)) return;
  print_search(a, model, sys, r);
  if (a.by_op)  // every stage of the winner, simulated
    fmt::print("\n{}", plan::format_by_op(model, sys,
                                          plan::evaluate_layout(model, sys, r.ranked.front().layout)));
  if (!a.svg_dir.empty()) write_search_svgs(a, model, sys, space, r);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "predict memory and step time of parallel layouts, search for the fastest that fits");
  cmd->add_option("--model", a->model, "model preset or .toml file")->capture_default_str();
  cmd->add_option_function<std::vector<std::string>>(
         "--system",
         [a](const std::vector<std::string>& v) {
           a->system = v.front();
           a->more_systems.assign(v.begin() + 1, v.end());
         },
         "system name (configs/systems/) or .toml file (default: frontier; local with "
         "--validate); with --validate, several calibrations of one machine taken across the "
         "runs: each run is predicted on each and the median prediction compared")
      ->expected(1, 64);
  cmd->add_option("--devices", a->devices, "devices (ranks) to plan for");
  cmd->add_option("--global-batch-size", a->global_batch, "sequences per optimizer step");
  cmd->add_option("--top", a->top, "how many layouts to print")->capture_default_str();
  cmd->add_option("--json", a->json, "also write the result as JSON to this file ('-': stdout only)");
  cmd->add_option("--tp", a->tp, "tensor-parallel sizes to try (default: all that divide)");
  cmd->add_option("--pp", a->pp, "pipeline-parallel sizes to try");
  cmd->add_option("--micro-batch", a->micro_batch, "micro-batch sizes to try");
  cmd->add_option("--virtual-stages", a->virtual_stages, "virtual stages to try (interleaved)");
  cmd->add_option("--zero", a->zero, "ZeRO stages to try (0-3)");
  cmd->add_option("--recompute", a->recompute, "recompute modes to try: none selective full");
  cmd->add_option("--schedule", a->schedule, "schedules to try: 1f1b interleaved gpipe");
  cmd->add_option("--sequence-parallel", a->sequence_parallel, "on, off or both")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision, "mixed16 (fp16/bf16 + fp32 master) or fp32")
      ->capture_default_str();
  cmd->add_flag("--no-flash-attention", a->no_flash, "store the attention scores");
  cmd->add_flag("--allow-tp-across-nodes", a->tp_across_nodes, "let tp exceed one node");
  cmd->add_flag("--list", a->list, "list the systems and model presets");
  cmd->add_flag("--study", a->study,
                "reproduce Dash et al. 2024 (Frontier): the study's figures beside the planner's");
  cmd->add_option("--svg", a->svg_dir,
                  "write charts to this directory: heatmap.svg (throughput over tp x pp) and "
                  "memory.svg (per stage) for a search, scaling.svg with --study");
  cmd->add_option("--validate", a->validate,
                  "metrics files of `tessera train --metrics-file` runs: predict each run's layout "
                  "and print the errors")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--by-op", a->by_op,
                "the best layout's step per pipeline stage by op (gemm, attention, memory-bound, "
                "each tp collective, bubble, exposed dp, optimizer) and model / hardware "
                "TFLOP/s, MFU, HFU; with --validate: each run's measured and predicted time by "
                "kind of work on the rank that wrote the file");
  cmd->callback([a] { run_plan(*a); });
}

}  // namespace tessera::cli
