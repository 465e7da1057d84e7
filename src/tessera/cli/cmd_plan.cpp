// `tessera plan`: predict memory and step time of layouts of a model on a
// system, search them, and print the best (or JSON for scripts), also as
// the `tessera train` flags that run it (--emit-config: a train --config
// file). --config plans a `tessera train --config` file's own run: one
// vocabulary for both commands (bridge/run_plan.h).
#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "tessera/cli/commands.h"
#include "tessera/cli/train_run.h"
#include "tessera/bridge/run_calibration.h"
#include "tessera/bridge/run_plan.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/moe_report.h"
#include "tessera/plan/plots.h"
#include "tessera/plan/published.h"
#include "tessera/plan/by_op_report.h"
#include "tessera/plan/calibrate_run.h"
#include "tessera/plan/report.h"
#include "tessera/plan/search.h"
#include "tessera/plan/study.h"
#include "tessera/plan/validate.h"

namespace tessera::cli {

using bridge::TrainKey;
using bridge::TrainKeys;

namespace {

struct PlanArgs {
  // system "": frontier, or local with --validate (runs of this machine).
  std::string model = "frontier-175b", system, json, sequence_parallel = "both";
  // --validate: further calibrations of the same machine (--system given
  // several times); each run's prediction is the median over all of them.
  std::vector<std::string> more_systems;
  std::string precision = "bf16";
  int64_t devices = 0, global_batch = 0;
  int64_t top = 5;
  std::vector<int64_t> tp, pp, micro_batch, virtual_stages;
  // Context parallelism (docs/context_parallel.md): sizes to try, their
  // K/V exchange, and the sequence length that makes it worth it.
  std::vector<int64_t> cp;
  std::vector<int64_t> ep;  // expert-parallel sizes to try (MoE models)
  std::string cp_comm = "p2p";
  int64_t seq_length = 0;  // 0: the model's own
  std::vector<int> zero;
  std::vector<std::string> recompute, schedule;
  bool no_flash = false, tp_across_nodes = false, list = false, study = false;
  bool overlap_grad_reduce = false, overlap_param_gather = false, tp_comm_overlap = false;
  std::vector<std::string> validate;  // metrics files of `tessera train` runs
  std::string validate_published;     // bench/published files (a file or a directory)
  bool by_op = false;                 // the best layout by op; --validate: each run by kind of work
  std::string svg_dir;                // --svg: write the charts here
  // --config: a `tessera train --config` file; plans that run (model, layout,
  // batch, precision) unless --search or a layout flag widens it.
  std::string config;
  bool search = false;
  std::string emit_config;            // --emit-config: the best layout as a train --config file
  // Which of the layout's flags the command line gave (they replace --config's).
  bool given_devices = false, given_batch = false, given_tp = false, given_pp = false,
       given_mb = false, given_v = false, given_zero = false, given_rc = false,
       given_sched = false, given_sp = false, given_precision = false, given_model = false,
       given_cp = false;
};

// A `tessera train --config` file as the planner sees it (cli/train_run.h).
struct ConfigRun {
  TrainConfig train;
};

ConfigRun read_config_run(const std::string& path) { return {read_planned_run(path)}; }

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

// --config: every setting of the layout is the run's, except those the
// command line gives (--tp 1 2 ...) and, with --search, those it leaves out.
// The engine is what runs it: fp32 state, its own arena, blockwise attention.
void fix_to_run(plan::SearchSpace& sp, const PlanArgs& a, const TrainConfig& t) {
  const ParallelConfig& p = t.par;
  sp.engine = true;
  sp.flash_attention = true;
  if (!a.given_precision)
    sp.precision = t.precision();
  if (!a.given_batch) sp.global_batch = p.global_batch;
  // The run's overlap settings unless the command line names them.
  sp.overlap_grad_reduce = sp.overlap_grad_reduce || t.overlap_grad_reduce;
  sp.overlap_param_gather = sp.overlap_param_gather || t.overlap_param_gather;
  // The run's K/V exchange for every cp > 1 candidate unless the command
  // line names cp.
  if (!a.given_cp) sp.cp_comm = p.cp_comm;
  if (a.search) return;
  if (!a.given_tp) sp.tp = {p.tp};
  if (!a.given_pp) sp.pp = {p.pp};
  if (!a.given_mb) sp.micro_batch = {p.micro_batch};
  if (!a.given_v) sp.virtual_stages = {p.virtual_stages};
  if (!a.given_zero) sp.zero_stages = {p.zero_stage};
  if (!a.given_rc) sp.recompute = {p.recompute};
  if (!a.given_sched) sp.schedules = {p.schedule};
  if (!a.given_sp) sp.sequence_parallel = {p.sequence_parallel};
  if (!a.given_cp) sp.cp = {p.cp}, sp.cp_comm = p.cp_comm;
  // The run's own stage split, even or not: planned as it would run.
  sp.first_stage_layers = p.first_stage_layers;
  sp.last_stage_layers = p.last_stage_layers;
  sp.uneven_stages = false;
}

plan::SearchSpace make_space(const PlanArgs& a, const ConfigRun* run) {
  plan::SearchSpace sp;
  sp.devices = a.devices;
  sp.global_batch = a.global_batch;
  sp.tp = a.tp;
  sp.pp = a.pp;
  sp.micro_batch = a.micro_batch;
  sp.virtual_stages = a.virtual_stages;
  sp.cp = a.cp;
  sp.ep = a.ep;
  sp.cp_comm = cp_comm_parse(a.cp_comm);
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
  else TESSERA_CHECK(a.sequence_parallel == "both", "{}: on, off or both (got '{}')",
                     flag::sequence_parallel, a.sequence_parallel);
  // fp8: Transformer Engine's recipe, bf16 around FP8 linear GEMMs (layout.h).
  sp.fp8 = a.precision == "fp8";
  TESSERA_CHECK(sp.fp8 || precision_parse(a.precision, sp.precision),
                "--precision: bf16, fp16, fp32 or fp8 (got '{}')", a.precision);
  sp.flash_attention = !a.no_flash;
  sp.overlap_grad_reduce = a.overlap_grad_reduce;
  sp.overlap_param_gather = a.overlap_param_gather;
  TESSERA_CHECK(!a.overlap_param_gather || a.overlap_grad_reduce,
                "--overlap-param-gather needs --overlap-grad-reduce (as in tessera train)");
  sp.tp_comm_overlap = a.tp_comm_overlap;  // never with a run: refused in run_plan
  sp.tp_within_node = !a.tp_across_nodes;
  if (run) fix_to_run(sp, a, run->train);
  return sp;
}

void print_list() {
  fmt::print("systems ({}, then {}/systems):", plan::user_systems_dir(), plan::config_dir());
  for (const auto& s : plan::list_systems()) fmt::print(" {}", s);
  fmt::print("\nmodel presets:\n");
  for (const auto& p : plan::model_presets()) {
    const double n = double(ParamLayout::count_model_params(p.config));
    fmt::print("  {:<18} L {:>3} h {:>5} heads {:>3} seq {:>4}  {:>8.2f}{} params  ({})\n", p.name,
               p.config.num_layers, p.config.hidden_size, p.config.num_heads, p.config.seq_length,
               n >= 1e9 ? n / 1e9 : n / 1e6, n >= 1e9 ? "B" : "M", p.source);
  }
  fmt::print("aliases (names are case-insensitive):");
  for (const auto& [alias, preset] : plan::model_aliases()) fmt::print(" {} = {}", alias, preset);
  fmt::print("\nor a model file: `tessera train`'s keys (num-layers = 4, ...); or --config FILE, a "
             "whole `tessera train --config` run\n");
}

void run_validate(const PlanArgs& a, const plan::SystemSpec& sys) {
  std::vector<plan::SystemSpec> systems{sys};
  for (const auto& s : a.more_systems) systems.push_back(plan::load_system(s));
  const plan::Validation v = plan::validate_runs(a.validate, systems);
  // A calibration holds for the ranks x threads it measured (their
  // contention is in its numbers): say so for each run that differs.
  std::vector<std::string> warned;
  for (const plan::RunCheck& c : v.runs) {
    const int64_t ranks = c.run.par.world();
    const std::string w = plan::calibration_mismatch(sys, ranks, c.run.threads);
    if (w.empty() || std::find(warned.begin(), warned.end(), w) != warned.end()) continue;
    warned.push_back(w);
    fmt::print("warning: {}\n", w);
  }
  fmt::print("{}", plan::format_validation(v, sys, a.by_op));
}

void run_study(const PlanArgs& a, const plan::SystemSpec& sys) {
  fmt::print("{}", plan::reproduce_study(sys));
  if (!a.svg_dir.empty())
    write_file(a.svg_dir, "scaling.svg",
               plan::svg_scaling(plan::study_scaling(sys),
                                 fmt::format("Dash et al. 2024 scaling on {}: planner vs study", sys.name)));
}

// Fails, saying why, when the search found no layout at all, or none that
// fits (after printing the closest ones with their predicted time and how
// far over memory they are).
void check_found(const PlanArgs& a, const std::string& what, const GPTConfig& model,
                 const plan::SystemSpec& sys, const plan::SearchSpace& space,
                 const plan::SearchResult& r) {
  if (r.candidates == 0) {
    auto near = plan::nearby_usable_device_counts(model, sys, space);
    std::string alt;
    for (auto n : near) alt += (alt.empty() ? "" : " or ") + std::to_string(n);
    fail("no layout of {} devices for {} with global batch {}: tp must divide the heads ({}) "
         "within a node of {}, pp the layers ({}), and dp the global batch; nearest usable "
         "device counts: {}",
         space.devices, what, space.global_batch, model.num_heads, sys.devices_per_node,
         model.num_layers, alt.empty() ? "none found" : alt);
  }
  if (r.ranked.empty()) {
    const plan::LayoutCost& c = r.closest_misses.front();
    if (a.json != "-") {
      fmt::print("{} on {} x {} ({}): no layout fits; the closest, with their predicted "
                 "time:\n{}",
                 what, space.devices, sys.device_name, sys.name,
                 plan::format_miss_table(r.closest_misses, r.closest_misses.size()));
      std::fflush(stdout);
    }
    fail("{} fits no layout on {} x {} ({:.1f} GB usable each): the least memory, {}, needs "
         "{:.1f} GB on stage {} ({}){}. Try more devices: about {} by that layout's memory",
         what, space.devices, sys.device_name, sys.usable_memory() / 1e9, c.layout.str(),
         c.peak_memory / 1e9, c.peak_stage, plan::over_memory_text(c),
         r.candidates > 1 ? "; every ZeRO stage, recompute mode and micro-batch asked for was tried"
                          : "",
         int64_t(std::ceil(double(space.devices) * c.peak_memory / sys.usable_memory())));
  }
}

// --cp: each size splits every sequence into 2 x cp chunks and the devices
// into whole cp groups (ParallelConfig::validate's rule, said before the search).
void check_cp(const PlanArgs& a, const GPTConfig& model) {
  for (int64_t cp : a.cp) {
    TESSERA_CHECK(cp >= 1, "--cp must be >= 1 (got {})", cp);
    TESSERA_CHECK(cp == 1 || model.seq_length % (2 * cp) == 0,
                  "--cp {}: the sequence of {} tokens does not split into 2 x cp = {} equal chunks "
                  "(context parallelism's load-balanced causal split; --seq-length to change it)",
                  cp, model.seq_length, 2 * cp);
    TESSERA_CHECK(a.devices % cp == 0, "--cp {}: {} devices do not split into cp groups of {}",
                  cp, a.devices, cp);
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
  const double params = double(ParamLayout::count_model_params(model));
  fmt::print("{} ({} parameters) on {} x {} ({}), global batch {}\n", a.model,
             params >= 1e9 ? fmt::format("{:.2f}B", params / 1e9)
                           : fmt::format("{:.2f}M", params / 1e6),
             a.devices, sys.device_name, sys.name, a.global_batch);
  fmt::print("searched {} layouts in {:.3f} s: {} fit, {} do not fit memory\n\n", r.candidates,
             r.seconds, r.ranked.size(), r.too_big);
  fmt::print("{}\n", plan::format_table(r.ranked, size_t(a.top)));
  fmt::print("best: {}", plan::format_breakdown(r.ranked.front(), sys));
  fmt::print("{}", plan::interval_text(r.ranked.front(), sys));
  fmt::print("{}", plan::moe_ep_report(model, sys, r.ranked.front()));  // "" when dense
  if (!r.closest_misses.empty() && r.too_big > 0) {
    // Layouts that do not fit still get their time, and how far over they are.
    fmt::print("\nclosest that do not fit ({} of {}), predicted as if they did:\n{}",
               r.closest_misses.size(), r.too_big,
               plan::format_miss_table(r.closest_misses, r.closest_misses.size()));
    // Its reason's breakdown "(weights ..., ...)" on a line of its own: the
    // output stays within 100 columns.
    std::string why = r.closest_misses.front().why_not;
    if (const size_t at = why.find(" ("); at != std::string::npos) why.replace(at, 1, "\n    ");
    fmt::print("  #1: {}\n", why);
  }
}

// The model and the best layout as `tessera train` settings: the --config
// file's own settings (lr, data, ...) kept, the layout replaced; a preset's
// shape otherwise.
TrainKeys best_as_train_keys(const PlanArgs& a, const GPTConfig& model,
                             const plan::LayoutCost& best) {
  TrainKeys keys;
  if (!a.config.empty()) {
    keys = bridge::non_layout_keys_of_file(a.config);
    if (a.given_precision) {  // --precision replaced the file's
      std::erase_if(keys, [](const TrainKey& k) { return k.key == "bf16" || k.key == "fp16"; });
      if (best.layout.precision != Precision::Fp32)
        keys.push_back({precision_name(best.layout.precision), TrainKey::Kind::Flag, "true", ""});
    }
  } else {
    keys = bridge::model_keys(model);
    // 16-bit GEMMs: the engine's --bf16 / --fp16 (fp32 master weights and state).
    if (best.layout.precision != Precision::Fp32)
      keys.push_back({precision_name(best.layout.precision), TrainKey::Kind::Flag, "true", ""});
  }
  const TrainKeys layout = bridge::layout_keys(best.layout);
  keys.insert(keys.end(), layout.begin(), layout.end());
  return keys;
}

void print_train_command(const TrainKeys& keys, const plan::LayoutCost& best) {
  const int64_t n = best.layout.devices();
  fmt::print("\nrun it with {} rank{}{}:\n{}", n, n == 1 ? "" : "s",
             n == 1 ? "" : fmt::format(" (e.g. scripts/mpirun.sh -n {} before it)", n),
             bridge::train_command(keys));
}

void write_emit_config(const PlanArgs& a, const TrainKeys& keys, const plan::SystemSpec& sys,
                       const plan::LayoutCost& best) {
  const int64_t n = best.layout.devices();
  const std::string header = fmt::format(
      "Written by `tessera plan` ({}{} on system '{}'): its best layout,\n"
      "  {}\n"
      "Predicted: {:.4f} s per step, {:.3f} GB at the peak stage. Train it on {} rank(s):\n"
      "  {}tessera train --config THIS_FILE",
      a.config.empty() ? "--model " : "--config ", a.model, sys.name, best.layout.str(),
      best.time.step, best.peak_memory / 1e9, n,
      n == 1 ? "" : fmt::format("scripts/mpirun.sh -n {} ", n));
  write_output_file(a.emit_config, bridge::train_config_toml(keys, header), "--emit-config");
  fmt::print(a.json == "-" ? stderr : stdout, "wrote {}\n", a.emit_config);
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

void run_plan(const PlanArgs& args) {
  if (args.list) {
    print_list();
    return;
  }
  if (!args.validate_published.empty()) {
    fmt::print("{}", plan::format_published(
                         plan::validate_published(plan::load_published(args.validate_published))));
    return;
  }
  TESSERA_CHECK(args.config.empty() || !args.given_model,
                "--config and --model: give one (--config names a whole `tessera train` run)");
  TESSERA_CHECK(!args.search || !args.config.empty(),
                "--search: only with --config (a --model plan always searches)");
  // Planner-only settings the engine cannot run: refused here, before
  // --config's calibration, and nowhere else (make_space builds on this).
  TESSERA_CHECK(args.config.empty() || args.precision != "fp8",
                "--precision fp8: tessera train does not train in FP8; plan --config plans the "
                "engine's own run (bf16, fp16 or fp32)");
  TESSERA_CHECK(args.config.empty() || !args.tp_comm_overlap,
                "--tp-comm-overlap: tessera train does not overlap its tensor-parallel "
                "collectives; plan --config plans the engine's own run");
  // Outputs are checked before the search (or the study) that fills them.
  if (!args.json.empty() && args.json != "-") check_output_file(args.json, "--json");
  if (!args.emit_config.empty()) check_output_file(args.emit_config, "--emit-config");
  if (!args.svg_dir.empty()) check_output_dir(args.svg_dir, "--svg", std::to_string(::getpid()));
  TESSERA_CHECK(args.more_systems.empty() || !args.validate.empty(),
                "--system: several system files only with --validate (one search needs one machine)");
  // A train config is a run on this machine unless --system says otherwise.
  const std::string system_name = !args.system.empty()                          ? args.system
                                  : !args.validate.empty() || !args.config.empty() ? "local"
                                                                                   : "frontier";
  plan::SystemSpec sys = plan::load_system(system_name);
  // A name can mean this user's calibration or the shipped file: say which
  // (on stderr, so `--json -` stays JSON).
  if (const std::string file = plan::find_system_file(system_name);
      !file.empty() && file.starts_with(plan::user_systems_dir()))
    fmt::print(stderr, "system '{}': {} (this machine's calibration)\n", system_name, file);
  // A run config without --system gets its own calibration below, not this
  // file: nothing to say about the file then.
  if (!args.system.empty() || args.config.empty())
    for (const std::string& w : plan::calibration_file_warnings(sys, plan::cpu_name()))
      fmt::print(stderr, "warning: {}\n", w);
  if (!args.validate.empty()) {
    run_validate(args, sys);
    return;
  }
  if (args.study) {
    run_study(args, sys);
    return;
  }
  // --config: the run's model, and its ranks unless --devices (tp x pp: one
  // data-parallel replica, as `tessera train` run on that many ranks).
  PlanArgs a = args;
  std::optional<ConfigRun> run;
  GPTConfig model;
  if (!a.config.empty()) {
    run = read_config_run(a.config);
    model = run->train.model;
    a.model = a.config;
    if (!a.given_devices) a.devices = run->train.par.tp * run->train.par.cp * run->train.par.pp;
    if (!a.given_batch) a.global_batch = run->train.par.global_batch;
    // The run on this machine (no --system): this run's own calibration.
    if (args.system.empty())
      bridge::use_run_calibration(sys, {model, run->train.par.micro_batch, run->train.par.tp,
                                        a.devices, run->train.threads, run->train.precision()});
  } else {
    model = plan::load_model(a.model, is_train_flag);
    // A preset whose source gives its training batch plans that batch.
    const plan::ModelPreset* preset = plan::find_preset(a.model);
    if (!a.given_batch && preset != nullptr && preset->global_batch > 0)
      a.global_batch = preset->global_batch;
    // At another --seq-length, the preset's tokens per step (Llama 3's 16M
    // tokens: 2048 x 8k, 128 x 128k).
    if (!a.given_batch && preset != nullptr && preset->global_batch > 0 && a.seq_length > 0)
      a.global_batch = std::max<int64_t>(
          1, preset->global_batch * preset->config.seq_length / a.seq_length);
  }
  TESSERA_CHECK(a.devices >= 1, "--devices: how many devices to plan for (got {})", a.devices);
  TESSERA_CHECK(a.global_batch >= 1, "--global-batch-size: sequences per step ({})",
                a.given_batch ? fmt::format("got {}", a.global_batch)
                              : std::string("required: this model's source gives no batch"));
  TESSERA_CHECK(a.top >= 1, "--top must be >= 1 (got {})", a.top);
  if (a.seq_length != 0) {
    TESSERA_CHECK(a.seq_length >= 1, "--seq-length must be >= 1 (got {})", a.seq_length);
    model.seq_length = a.seq_length;
    // A learned position table grows with the context; rope has none.
    if (!model.rope()) model.max_position_embeddings = 0;
  }
  check_cp(a, model);
  const plan::SearchSpace space = make_space(a, run ? &*run : nullptr);
  TESSERA_CHECK(!space.fp8 || sys.peak_flops_fp8 > 0,
                "--precision fp8: system '{}' ({}) lists no fp8 peak (device.peak_TFLOPs.fp8): "
                "its device has no FP8 units", sys.name, sys.source);
  plan::SearchResult r = plan::search_layouts(model, sys, space);
  if (!a.json.empty() && r.ranked.empty()) write_json(a, sys, r);  // the misses, with times
  check_found(a, a.model, model, sys, space, r);
  const plan::LayoutCost& best = r.ranked.front();
  const TrainKeys keys = best_as_train_keys(a, model, best);
  if (!a.emit_config.empty() && a.json == "-") write_emit_config(a, keys, sys, best);
  if (!a.json.empty() && write_json(a, sys, r)) return;
  print_search(a, model, sys, r);
  print_train_command(keys, best);
  if (!a.emit_config.empty()) write_emit_config(a, keys, sys, best);
  if (a.by_op)  // every stage of the winner, simulated
    fmt::print("\n{}", plan::format_by_op(model, sys,
                                          plan::evaluate_layout(model, sys, r.ranked.front().layout)));
  if (!a.svg_dir.empty()) write_search_svgs(a, model, sys, space, r);
  if (run) {
    const std::string w = plan::calibration_mismatch(sys, a.devices, run->train.threads);
    if (!w.empty()) fmt::print("warning: {}\n", w);
  }
}

}  // namespace

void register_plan(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "predict memory and step time of parallel layouts, search for the fastest that fits");
  cmd->add_option("--model", a->model,
                  "model preset (any case; 175B, 1T, ... are the Frontier study's), or a model "
                  ".toml file in `tessera train`'s key names (num-layers = 4, ...)")
      ->capture_default_str();
  cmd->add_option("--config", a->config,
                  "a `tessera train --config` file: plan exactly that run (model, layout, batch, "
                  "precision; vocabulary from vocab-size or its data) on --devices (default tp x "
                  "pp) of --system (default local); layout flags given here replace its values")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--search", a->search,
                "with --config: search every layout of that model and batch instead of the "
                "file's own (layout flags given still restrict it)");
  cmd->add_option("--emit-config", a->emit_config,
                  "write the best layout as a `tessera train --config` TOML file (with --config: "
                  "that file's other settings kept)");
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
  cmd->add_option("--cp", a->cp,
                  "context-parallel sizes to try (tessera train's --context-parallel-size; "
                  "default 1, and with 16384 tokens or more every power of two that splits "
                  "the sequence into 2 x cp chunks)");
  cmd->add_option("--ep", a->ep,
                  "expert-parallel sizes to try for an MoE model (tessera train's "
                  "--expert-model-parallel-size; default every power of two dividing the experts "
                  "and dp x cp)");
  cmd->add_option(flag::cp_comm, a->cp_comm,
                  "context parallelism's K/V exchange: p2p (a ring behind the attention) or "
                  "all_gather")
      ->capture_default_str();
  cmd->add_option("--seq-length", a->seq_length,
                  "plan the model at this sequence length (tokens per sequence) instead of its own");
  cmd->add_option("--zero", a->zero, "ZeRO stages to try (0-3)");
  cmd->add_option("--recompute", a->recompute, "recompute modes to try: none selective full");
  cmd->add_option("--schedule", a->schedule,
                  "schedules to try: 1f1b interleaved gpipe zb-h1 (default: all four)");
  // Train's flag, planned: which of its values the search tries.
  cmd->add_option(flag::sequence_parallel, a->sequence_parallel, "on, off or both")
      ->capture_default_str();
  cmd->add_option("--precision", a->precision, "bf16 or fp16 (16-bit with fp32 master weights; fp16 with loss "
                  "scaling), fp32, or fp8 (bf16 with Transformer Engine's FP8 linear GEMMs; "
                  "devices with an fp8 peak)")
      ->capture_default_str();
  cmd->add_flag("--no-flash-attention", a->no_flash, "store the attention scores");
  cmd->add_flag("--allow-tp-across-nodes", a->tp_across_nodes, "let tp exceed one node");
  cmd->add_flag("--overlap-grad-reduce", a->overlap_grad_reduce,
                "plan runs whose data-parallel gradient reduction runs behind the last "
                "backward (tessera train / Megatron-LM's flag; default off, as there)");
  cmd->add_flag("--overlap-param-gather", a->overlap_param_gather,
                "plan ZeRO-1/2 runs whose parameter all-gather runs behind the next forward "
                "(needs --overlap-grad-reduce)");
  cmd->add_flag("--tp-comm-overlap", a->tp_comm_overlap,
                "plan Megatron-LM runs with --tp-comm-overlap: sequence-parallel layouts' "
                "tensor-parallel gathers and reduce-scatters run behind their GEMMs (planner only)");
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
  cmd->add_option("--validate-published", a->validate_published,
                  "a published-runs file or directory (bench/published): plan every run at its "
                  "layout on its system and print predicted vs published step, the error, the "
                  "step's terms, and MAPE / max / mean signed error by source, kind and system");
  cmd->add_flag("--by-op", a->by_op,
                "the best layout's step per pipeline stage by op (gemm, attention, memory-bound, "
                "each tp collective, bubble, exposed dp, optimizer) and model / hardware "
                "TFLOP/s, MFU, HFU; with --validate: each run's measured and predicted time by "
                "kind of work on the rank that wrote the file");
  cmd->callback([a, cmd] {
    auto given = [cmd](const char* name) { return cmd->get_option(name)->count() > 0; };
    a->given_model = given("--model");
    a->given_devices = given("--devices");
    a->given_batch = given("--global-batch-size");
    a->given_tp = given("--tp");
    a->given_pp = given("--pp");
    a->given_mb = given("--micro-batch");
    a->given_v = given("--virtual-stages");
    a->given_zero = given("--zero");
    a->given_rc = given("--recompute");
    a->given_sched = given("--schedule");
    a->given_sp = given(flag::sequence_parallel);
    a->given_cp = given("--cp") || given(flag::cp_comm);
    a->given_precision = given("--precision");
    run_plan(*a);
  });
}

}  // namespace tessera::cli
