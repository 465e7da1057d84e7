#include "tessera/plan/published.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <memory>
#include <toml++/toml.h>

#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

namespace fs = std::filesystem;

FlopConvention flop_convention_parse(const std::string& name, const std::string& where) {
  if (name == "megatron-2021") return FlopConvention::Megatron2021;
  if (name == "megatron-model") return FlopConvention::MegatronModel;
  if (name == "6nd") return FlopConvention::SixND;
  if (name == "6nd-attn") return FlopConvention::SixNDAttn;
  if (name == "6nd-noembed-attn") return FlopConvention::SixNDNoEmbedAttn;
  fail("{}: flops = \"{}\" is none of megatron-2021, megatron-model, 6nd, 6nd-attn, "
       "6nd-noembed-attn",
       where, name);
}

double convention_flops(FlopConvention c, const GPTConfig& m, int64_t global_batch) {
  const double B = double(global_batch), s = double(m.seq_length), l = double(m.num_layers),
               h = double(m.hidden_size), V = double(m.vocab_size);
  const double tokens = B * s;
  const double N = double(ParamLayout::count_model_params(m));
  switch (c) {
    case FlopConvention::Megatron2021:
      return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    case FlopConvention::MegatronModel:
      return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    case FlopConvention::SixND: return 6 * N * tokens;
    case FlopConvention::SixNDAttn: return 6 * N * tokens + 12 * l * h * s * tokens;
    case FlopConvention::SixNDNoEmbedAttn: return 6 * (N - V * h) * tokens + 12 * l * h * s * tokens;
  }
  return 0;
}

std::string PublishedRun::kind() const { return layout_kind(layout); }

std::string layout_kind(const PlanLayout& layout) {
  const auto& p = layout.par;
  if (p.zero_stage == 3 && p.dp > 1) return "fsdp";
  if (p.tp > 1 && p.pp > 1) return "tp+pp";
  if (p.pp > 1) return "pp";
  if (p.tp > 1) return "tp";
  return "dp";
}

namespace {

// Every key a [[run]] may hold (bench/published/README.md); anything else is
// a typo the file's author should hear about.
constexpr const char* kRunKeys[] = {
    "name", "system", "devices", flag_key(flag::tp), flag_key(flag::pp),
    flag_key(flag::micro_batch), flag_key(flag::global_batch), flag_key(flag::zero_stage),
    "recompute", "precision", "flash-attention", "attention-kernel", flag_key(flag::sequence_parallel),
    flag_key(flag::schedule), "virtual-stages",
    "overlap-grad-reduce", "overlap-param-gather", "tp-comm-overlap", "grad-reduce-dtype", "optimizer", "eager-elementwise", "fsdp-flat-params", "torchtitan-op-sac", "fsdp2-pipelining", "dropout", "fp8-recipe", "inferred", "note", "excluded", "model", "step-seconds",
    "tokens-per-second", "tokens-per-second-per-device", "tflops-per-device", "mfu",
    "peak-tflops", "flops", "memory-gb", flag_key(flag::first_stage_layers),
    flag_key(flag::last_stage_layers)};
constexpr const char* kMeasures[] = {"step-seconds", "tokens-per-second",
                                     "tokens-per-second-per-device", "tflops-per-device", "mfu"};

struct RunReader {
  const toml::table& t;
  std::string where;  // "FILE, run 'NAME'"

  std::string str(const char* key, const char* fallback = nullptr) const {
    const auto v = t[key].value<std::string>();
    if (!v) {
      TESSERA_CHECK(fallback != nullptr && !t.contains(key), "{}: '{}' must be a string", where,
                    key);
      return fallback;
    }
    return *v;
  }
  int64_t integer(const char* key, std::optional<int64_t> fallback = std::nullopt) const {
    const auto v = t[key].value<int64_t>();
    if (!v || !t[key].is_integer()) {
      TESSERA_CHECK(fallback.has_value() && !t.contains(key), "{}: '{}' must be an integer", where,
                    key);
      return *fallback;
    }
    TESSERA_CHECK(*v >= 1 || std::string_view(key) == flag_key(flag::zero_stage), "{}: '{}' must be >= 1 (got {})",
                  where, key, *v);
    return *v;
  }
  bool flag(const char* key, bool fallback) const {
    if (!t.contains(key)) return fallback;
    const auto v = t[key].value<bool>();
    TESSERA_CHECK(t[key].is_boolean() && v.has_value(), "{}: '{}' must be true or false", where, key);
    return *v;
  }
  double positive(const char* key) const {
    const auto v = t[key].value<double>();
    TESSERA_CHECK(v.has_value() && std::isfinite(*v) && *v > 0, "{}: '{}' must be a positive number",
                  where, key);
    return *v;
  }
};

// The measured figure as seconds per step: throughput through the step's
// tokens, TFLOP/s and MFU through the source's own FLOP count of the step.
double published_step_seconds(const RunReader& r, const PublishedRun& run,
                              const std::string& source_flops, std::string& measured) {
  int given = 0;
  for (const char* k : kMeasures) given += r.t.contains(k);
  TESSERA_CHECK(given == 1, "{}: give exactly one measured figure ({}), not {}", r.where,
                "step-seconds, tokens-per-second, tokens-per-second-per-device, tflops-per-device "
                "or mfu",
                given);
  const double tokens = double(run.layout.par.global_batch * run.model.seq_length);
  const double devices = double(run.layout.devices());
  if (r.t.contains("step-seconds")) {
    measured = fmt::format("step {:.4g} s", r.positive("step-seconds"));
    return r.positive("step-seconds");
  }
  if (r.t.contains("tokens-per-second")) {
    measured = fmt::format("{:.4g} tokens/s", r.positive("tokens-per-second"));
    return tokens / r.positive("tokens-per-second");
  }
  if (r.t.contains("tokens-per-second-per-device")) {
    measured = fmt::format("{:.4g} tokens/s/device", r.positive("tokens-per-second-per-device"));
    return tokens / (devices * r.positive("tokens-per-second-per-device"));
  }
  const std::string conv_name = r.str("flops", source_flops.empty() ? nullptr : source_flops.c_str());
  const FlopConvention conv = flop_convention_parse(conv_name, r.where);
  const double flops = convention_flops(conv, run.model, run.layout.par.global_batch);
  double per_device = 0;  // FLOP/s
  if (r.t.contains("tflops-per-device")) {
    per_device = r.positive("tflops-per-device") * 1e12;
    measured = fmt::format("{:.4g} TFLOP/s/device ({})", per_device / 1e12, conv_name);
  } else {
    TESSERA_CHECK(r.t.contains("peak-tflops"), "{}: 'mfu' needs 'peak-tflops' (the peak the source "
                  "divided by)", r.where);
    const double mfu = r.positive("mfu");
    TESSERA_CHECK(mfu <= 1, "{}: 'mfu' is a fraction (got {})", r.where, mfu);
    per_device = mfu * r.positive("peak-tflops") * 1e12;
    measured = fmt::format("MFU {:.1f} % of {:.4g} TFLOP/s ({})", 100 * mfu,
                           r.positive("peak-tflops"), conv_name);
  }
  return flops / (devices * per_device);
}

PublishedRun read_run(const toml::table& t, const toml::table& source, const std::string& file) {
  PublishedRun run;
  run.file = file;
  run.source = source["key"].value_or(std::string());
  run.citation = source["citation"].value_or(std::string());
  run.stack = source["stack"].value_or(std::string());
  run.date = source["date"].value_or(std::string());
  RunReader r{t, file};
  run.name = r.str("name");
  r.where = fmt::format("{}, run '{}'", file, run.name);
  for (const auto& [k, v] : t) {
    const std::string_view key = k.str();
    TESSERA_CHECK(std::any_of(std::begin(kRunKeys), std::end(kRunKeys),
                              [&](const char* known) { return key == known; }),
                  "{}: unknown key '{}'", r.where, clipped(key));
  }
  run.system = r.str("system");
  // The model: a preset name or an inline table of train's model keys.
  if (const toml::table* m = t["model"].as_table()) {
    run.model_name = "inline";
    run.model = model_from_table(*m, r.where + ", [run.model]");
  } else {
    run.model_name = r.str("model");
    const ModelPreset* p = find_preset(run.model_name);
    TESSERA_CHECK(p != nullptr, "{}: model '{}' is no preset (`tessera plan --list`)", r.where,
                  run.model_name);
    run.model = p->config;
  }
  PlanLayout& L = run.layout;
  ParallelConfig& par = L.par;
  const int64_t devices = r.integer("devices");
  par.tp = r.integer(flag_key(flag::tp), 1);
  par.pp = r.integer(flag_key(flag::pp), 1);
  TESSERA_CHECK(devices % (par.tp * par.pp) == 0, "{}: devices {} is not a multiple of tp x pp = {}",
                r.where, devices, par.tp * par.pp);
  par.dp = devices / (par.tp * par.pp);
  par.micro_batch = r.integer(flag_key(flag::micro_batch));
  par.global_batch = r.integer(flag_key(flag::global_batch));
  par.zero_stage = int(r.integer(flag_key(flag::zero_stage), 0));
  TESSERA_CHECK(par.zero_stage >= 0 && par.zero_stage <= 3, "{}: {} must be 0-3", r.where,
                flag_key(flag::zero_stage));
  const std::string rc = r.str("recompute", "none");
  TESSERA_CHECK(rc == "none" || rc == "selective" || rc == "full",
                "{}: recompute must be none, selective or full (got '{}')", r.where, rc);
  par.recompute = rc == "full" ? Recompute::Full : rc == "selective" ? Recompute::Selective
                                                                     : Recompute::None;
  const std::string precision = r.str("precision", "bf16");
  L.fp8 = precision == "fp8";
  // Whose FP8: Transformer Engine (Megatron-LM, NeMo) or torchao (torchtitan).
  if (t.contains("fp8-recipe")) {
    const std::string recipe = r.str("fp8-recipe");
    TESSERA_CHECK(recipe == "te" || recipe == "torchao",
                  "{}: fp8-recipe must be te or torchao (got '{}')", r.where, clipped(recipe));
    TESSERA_CHECK(L.fp8, "{}: fp8-recipe needs precision = \"fp8\"", r.where);
    L.fp8_torchao = recipe == "torchao";
  }
  TESSERA_CHECK(L.fp8 || (precision_parse(precision, L.precision) && L.precision != Precision::Fp32),
                "{}: precision must be bf16, fp16 or fp8 (got '{}')", r.where, precision);
  if (L.fp8) L.precision = Precision::Bf16;
  L.flash_attention = r.flag("flash-attention", true);
  // Which flash kernel: the system file's own, or FlashAttention in Triton
  // (llm-foundry's `attn_impl: triton`, priced by its triton_attention_rate).
  const std::string kernel = r.str("attention-kernel", "flash");
  TESSERA_CHECK(kernel == "flash" || kernel == "triton",
                "{}: attention-kernel must be flash or triton (got '{}')", r.where, clipped(kernel));
  L.triton_attention = kernel == "triton";
  TESSERA_CHECK(!L.triton_attention || L.flash_attention,
                "{}: attention-kernel = \"triton\" needs flash-attention = true", r.where);
  par.sequence_parallel = r.flag(flag_key(flag::sequence_parallel), false);
  par.schedule = schedule_kind_parse(r.str(flag_key(flag::schedule), "1f1b"));
  par.virtual_stages = r.integer("virtual-stages", 1);
  // Uneven stages, as Megatron-LM's flags (BLOOM's 70 layers over 12 stages).
  for (const auto& [key, layers] : {std::pair{flag_key(flag::first_stage_layers), &par.first_stage_layers},
                                    std::pair{flag_key(flag::last_stage_layers), &par.last_stage_layers}})
    if (t.contains(key)) *layers = r.integer(key);
  L.overlap_grad_reduce = r.flag("overlap-grad-reduce", false);
  L.overlap_param_gather = r.flag("overlap-param-gather", false);
  L.tp_comm_overlap = r.flag("tp-comm-overlap", false);
  // How the optimizer step runs: one fused kernel (Megatron-LM, Apex) or eager
  // PyTorch's element-wise ops (layout.h eager_optimizer).
  const std::string optimizer = r.str("optimizer", "fused");
  TESSERA_CHECK(optimizer == "fused" || optimizer == "eager",
                "{}: optimizer must be fused or eager (got '{}')", r.where, clipped(optimizer));
  L.eager_optimizer = optimizer == "eager";
  L.eager_elementwise = r.flag("eager-elementwise", false);
  L.fsdp1_flat_grads = r.flag("fsdp-flat-params", false);
  L.torchtitan_op_sac = r.flag("torchtitan-op-sac", false);
  TESSERA_CHECK(!L.torchtitan_op_sac || par.recompute == Recompute::Selective,
                "{}: torchtitan-op-sac needs recompute = \"selective\"", r.where);
  L.fsdp2_pipelining = r.flag("fsdp2-pipelining", false);
  // `dropout = false`: the run trained without dropout. A GPT then stores no
  // masks; a Llama-family model follows its config's dropout anyway.
  L.gpt_without_dropout = !r.flag("dropout", true);
  TESSERA_CHECK(!L.fsdp2_pipelining || (par.pp > 1 && par.zero_stage >= 2 && par.dp > 1),
                "{}: fsdp2-pipelining needs {} > 1 and {} 2 or 3 over dp > 1", r.where,
                flag_key(flag::pp), flag_key(flag::zero_stage));
  // The dtype the data-parallel gradient reduction moves (FSDP's reduce_dtype).
  if (t.contains("grad-reduce-dtype")) {
    const std::string g = r.str("grad-reduce-dtype");
    TESSERA_CHECK(g == "fp32" || g == "bf16" || g == "fp16",
                  "{}: grad-reduce-dtype must be fp32, bf16 or fp16 (got '{}')", r.where, clipped(g));
    L.grad_reduce_bytes = g == "fp32" ? 4.0 : 2.0;
  }
  // As Megatron-LM: the userbuffers overlap cuts sequence-parallel collectives.
  TESSERA_CHECK(!L.tp_comm_overlap || (par.sequence_parallel && par.tp > 1),
                "{}: tp-comm-overlap needs {} and {} > 1", r.where,
                flag_key(flag::sequence_parallel), flag_key(flag::tp));
  try {
    par.validate(run.model, devices);
  } catch (const Error& e) {
    fail("{}: {}", r.where, e.what());
  }
  if (const toml::array* inf = t["inferred"].as_array())
    for (const auto& v : *inf) run.inferred.push_back(v.value_or(std::string("?")));
  run.published_step = published_step_seconds(r, run, source["flops"].value_or(std::string()),
                                              run.measured);
  if (t.contains("memory-gb")) run.memory_gb = r.positive("memory-gb");
  if (t.contains("excluded")) {
    run.excluded = r.str("excluded");
    TESSERA_CHECK(!run.excluded.empty(), "{}: excluded needs its reason", r.where);
  }
  return run;
}

std::vector<PublishedRun> load_file(const std::string& file) {
  toml::table root;
  try {
    root = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    fail("{}: TOML parse error at line {}: {}", file, e.source().begin.line, e.description());
  }
  const toml::table* source = root["source"].as_table();
  TESSERA_CHECK(source != nullptr && (*source)["key"].is_string(),
                "{}: needs a [source] table with its key", file);
  const toml::array* runs = root["run"].as_array();
  TESSERA_CHECK(runs != nullptr && !runs->empty(), "{}: no [[run]]", file);
  std::vector<PublishedRun> out;
  for (const auto& node : *runs) {
    const toml::table* t = node.as_table();
    TESSERA_CHECK(t != nullptr, "{}: each [[run]] must be a table", file);
    out.push_back(read_run(*t, *source, file));
  }
  return out;
}

}  // namespace

std::vector<PublishedRun> load_published(const std::string& path) {
  TESSERA_CHECK(fs::exists(path), "--validate-published: no such file or directory '{}'", path);
  if (!fs::is_directory(path)) return load_file(path);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path))
    if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  TESSERA_CHECK(!files.empty(), "--validate-published: no .toml files in '{}'", path);
  std::vector<PublishedRun> out;
  for (const auto& f : files) {
    auto runs = load_file(f);
    out.insert(out.end(), runs.begin(), runs.end());
  }
  return out;
}

StepTerms step_terms(const LayoutCost& c) {
  const StepBreakdown& b = c.time;
  // The stage the pipeline waits on: the most compute.
  const StageCost* busiest = &c.stages.front();
  for (const StageCost& s : c.stages)
    if (s.ops.total() - s.ops[Op::Comm] > busiest->ops.total() - busiest->ops[Op::Comm])
      busiest = &s;
  const Profile& o = busiest->ops;
  StepTerms t;
  t.gemm = o[Op::Gemm];
  t.attention = o[Op::Attention];
  t.memory_bound = o[Op::LayerNorm] + o[Op::Gelu] + o[Op::Residual] + o[Op::Embedding] +
                   o[Op::Loss] + o[Op::Dropout] + o[Op::Cast];
  t.tp_comm = b.tp_comm;
  t.pp_bubble = b.bubble;
  t.dp_exposed = b.dp_exposed + b.zero3_gather;
  t.optimizer = b.optimizer;
  t.other = b.step - (t.gemm + t.attention + t.memory_bound + t.tp_comm + t.pp_bubble +
                      t.dp_exposed + t.optimizer);
  return t;
}

ErrorSummary summarize(const std::vector<double>& errors) {
  ErrorSummary s;
  s.n = errors.size();
  for (double e : errors) {
    s.mape += std::abs(e);
    s.mean_signed += e;
    s.max_abs = std::max(s.max_abs, std::abs(e));
  }
  if (s.n > 0) s.mape /= double(s.n), s.mean_signed /= double(s.n);
  return s;
}

PublishedValidation validate_published(const std::vector<PublishedRun>& runs) {
  PublishedValidation v;
  std::map<std::string, std::unique_ptr<SystemSpec>> systems;
  std::map<std::string, std::vector<double>> by_source, by_kind, by_system;
  std::vector<double> all;
  for (const PublishedRun& run : runs) {
    auto& sys = systems[run.system];
    if (!sys) {
      try {
        sys = std::make_unique<SystemSpec>(load_system(run.system));
      } catch (const Error& e) {
        fail("{}, run '{}': {}", run.file, run.name, e.what());
      }
    }
    TESSERA_CHECK(!run.layout.fp8 || sys->peak_flops_fp8 > 0,
                  "{}, run '{}': precision fp8 on system '{}', which lists no fp8 peak", run.file,
                  run.name, run.system);
    TESSERA_CHECK(!run.layout.triton_attention ||
                      (sys->triton_attention_rate > 0 && sys->triton_attention_backward_rate > 0),
                  "{}, run '{}': attention-kernel = \"triton\" on system '{}', which gives no "
                  "gemm.triton_attention_rate and gemm.triton_attention_backward_rate",
                  run.file, run.name, run.system);
    PublishedCheck c;
    c.run = run;
    c.cost = evaluate_layout(run.model, *sys, run.layout);
    c.error = c.cost.time.step / run.published_step - 1;
    c.terms = step_terms(c.cost);
    if (!run.excluded.empty()) {  // shown, never counted
      v.rows.push_back(std::move(c));
      continue;
    }
    all.push_back(c.error);
    by_source[run.source].push_back(c.error);
    by_kind[run.kind()].push_back(c.error);
    by_system[run.system].push_back(c.error);
    v.rows.push_back(std::move(c));
  }
  v.all = summarize(all);
  for (auto& [k, e] : by_source) v.by_source[k] = summarize(e);
  for (auto& [k, e] : by_kind) v.by_kind[k] = summarize(e);
  for (auto& [k, e] : by_system) v.by_system[k] = summarize(e);
  return v;
}

namespace {

std::string summary_line(const std::string& what, const ErrorSummary& s) {
  return fmt::format("  {:<22} {:>3} runs  MAPE {:5.1f} %  max {:5.1f} %  mean signed {:+6.1f} %\n",
                     what, s.n, 100 * s.mape, 100 * s.max_abs, 100 * s.mean_signed);
}

}  // namespace

std::string format_published(const PublishedValidation& v) {
  const size_t excluded_rows = v.rows.size() - v.all.n;
  std::string out = fmt::format(
      "{} published runs{}, each planned at its layout (error: predicted / published step - 1; "
      "below 0 the planner is optimistic)\n\n",
      v.rows.size(), excluded_rows ? fmt::format(" ({} excluded: x)", excluded_rows) : "");
  out += fmt::format("{:<40} {:<18} {:<6} {:>9} {:>9} {:>8} {:>4}  {}\n", "run", "system", "kind",
                     "published", "predicted", "error", "fits",
                     "terms, % of predicted step: gemm attn mem tp pp dp opt other");
  for (const PublishedCheck& c : v.rows) {
    const double step = c.cost.time.step;
    const StepTerms& t = c.terms;
    auto pct = [&](double x) { return fmt::format("{:>3.0f}", 100 * x / step); };
    std::string name = c.run.source + ": " + c.run.name;
    if (name.size() > 40) name = name.substr(0, 39) + "~";
    out += fmt::format("{:<40} {:<18} {:<6} {:>8.3f}s {:>8.3f}s {:>+6.1f}%{} {:>4}  {} {} {} {} {} {} {} {}\n",
                       name, c.run.system, c.run.kind(), c.run.published_step, step,
                       100 * c.error, c.run.excluded.empty() ? " " : "x", c.cost.fits ? "yes" : "NO", pct(t.gemm), pct(t.attention),
                       pct(t.memory_bound), pct(t.tp_comm), pct(t.pp_bubble), pct(t.dp_exposed),
                       pct(t.optimizer), pct(t.other));
  }
  std::string excluded;
  for (const PublishedCheck& c : v.rows)
    if (!c.run.excluded.empty())
      excluded += fmt::format("  {}: {}\n", c.run.source + ": " + c.run.name, c.run.excluded);
  if (!excluded.empty())
    out += "\nx: the step is left out of every figure below and of the prediction intervals "
           "(its memory is compared):\n" + excluded;
  std::string memory;
  for (const PublishedCheck& c : v.rows)
    if (c.run.memory_gb > 0)
      memory += fmt::format("  {:<40} published {:6.1f} GB, predicted {:6.1f} GB ({:+.1f} %)\n",
                            c.run.source + ": " + c.run.name, c.run.memory_gb,
                            c.cost.peak_memory / 1e9,
                            100 * (c.cost.peak_memory / 1e9 / c.run.memory_gb - 1));
  if (!memory.empty()) out += "\nmemory per device where the source states it:\n" + memory;
  out += "\nby source:\n";
  for (const auto& [k, s] : v.by_source) out += summary_line(k, s);
  out += "by kind of layout:\n";
  for (const auto& [k, s] : v.by_kind) out += summary_line(k, s);
  out += "by system:\n";
  for (const auto& [k, s] : v.by_system) out += summary_line(k, s);
  out += "\n" + summary_line("all", v.all);
  return out;
}

namespace {

double percentile(std::vector<double> x, double q) {
  std::sort(x.begin(), x.end());
  const double at = q * double(x.size() - 1);
  const size_t lo = size_t(std::floor(at)), hi = size_t(std::ceil(at));
  return x[lo] + (at - double(lo)) * (x[hi] - x[lo]);
}

}  // namespace

PredictionInterval prediction_interval(const PublishedValidation& v, const std::string& kind) {
  std::vector<double> ratios, pooled;  // published / predicted step
  for (const PublishedCheck& c : v.rows) {
    if (!c.run.excluded.empty()) continue;
    const double r = 1.0 / (1.0 + c.error);
    pooled.push_back(r);
    if (c.run.kind() == kind) ratios.push_back(r);
  }
  PredictionInterval p;
  p.kind = kind;
  if (ratios.size() < 5) ratios = pooled, p.kind = "all";
  if (ratios.empty()) return p;
  p.runs = ratios.size();
  p.low = percentile(ratios, 0.1);
  p.high = percentile(ratios, 0.9);
  return p;
}

std::string interval_text(const LayoutCost& c, const SystemSpec& sys) {
  if (sys.cores > 0) return "";  // the suite is of GPU clusters; a CPU has its own validation
  const PublishedValidation* v = nullptr;
  try {
    v = shipped_published_validation();
  } catch (const Error& e) {  // a plan stands without its interval: say why there is none
    return fmt::format("  (no prediction interval: {})\n", e.what());
  }
  if (v == nullptr || v->rows.empty()) return "";
  const PredictionInterval p = prediction_interval(*v, layout_kind(c.layout));
  const double step = c.time.step;
  return fmt::format(
      "  80 % interval: step {:.3f}-{:.3f} s, {:.0f}-{:.0f} tokens/s\n"
      "    (published / predicted step of the suite's {} {} runs: {:.2f}-{:.2f}, bench/published)\n",
      step * p.low, step * p.high, c.tokens_per_second / p.high, c.tokens_per_second / p.low,
      p.runs, p.kind == "all" ? "published" : p.kind, p.low, p.high);
}

const PublishedValidation* shipped_published_validation() {
  static const std::unique_ptr<PublishedValidation> v = []() -> std::unique_ptr<PublishedValidation> {
    const fs::path dir = fs::path(config_dir()).parent_path() / "bench" / "published";
    if (!fs::is_directory(dir)) return nullptr;
    return std::make_unique<PublishedValidation>(validate_published(load_published(dir.string())));
  }();
  return v.get();
}

}  // namespace tessera::plan
