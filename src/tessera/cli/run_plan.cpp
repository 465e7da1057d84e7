#include "tessera/cli/run_plan.h"

#include "tessera/cli/run_calibration.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"
#include "tessera/plan/report.h"
#include "tessera/train/data_setup.h"

namespace tessera::cli {

namespace {

TrainKey integer(const char* key, int64_t v) {
  return {key, TrainKey::Kind::Integer, std::to_string(v), ""};
}
TrainKey flag(const char* key, bool on) {
  return {key, TrainKey::Kind::Flag, on ? "true" : "false", ""};
}
TrainKey string(const char* key, const std::string& v) {
  return {key, TrainKey::Kind::String, v, ""};
}
// A float: the shortest text that reads back the same value, with a '.' or
// an exponent in TOML (where 500000 alone would be an integer).
TrainKey number(const char* key, float v) {
  const std::string text = fmt::format("{}", v);
  const bool has_point = text.find_first_of(".eEn") != std::string::npos;
  return {key, TrainKey::Kind::Toml, has_point ? text : text + ".0", text};
}

// The keys layout_keys writes, and the one it replaces
// (num-layers-per-virtual-pipeline-stage sets virtual-pipeline-stages).
constexpr const char* kLayoutKeys[] = {
    "tensor-model-parallel-size", "pipeline-model-parallel-size", "micro-batch-size",
    "global-batch-size",          "zero-stage",                   "recompute-granularity",
    "sequence-parallel",          "pipeline-schedule",            "virtual-pipeline-stages",
    "num-layers-per-virtual-pipeline-stage", "overlap-grad-reduce",   "overlap-param-gather",
    "decoder-first-pipeline-num-layers",     "decoder-last-pipeline-num-layers"};

// A TOML basic string: quotes and backslashes escaped (control characters
// do not occur in flag values).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

TrainConfig read_planned_run(const std::string& path) {
  int64_t vocab_flag = 0;
  TrainConfig c = read_train_config(path, &vocab_flag);
  if (vocab_flag > 0) {
    c.model.vocab_size = vocab_flag;
  } else {
    // No vocab-size: the vocabulary is the data's, as `tessera train` finds
    // it (the embedded corpus's tokenizer when the file names no data).
    try {
      c.model.vocab_size = open_training_data(c, 0).vocab_size;
    } catch (const Error& e) {
      fail("--config {}: no vocab-size, and the run's data gives none: {}", path, e.what());
    }
  }
  try {
    c.model.validate();
  } catch (const Error& e) {
    fail("--config {}: {}", path, e.what());
  }
  return c;
}

plan::PlanLayout layout_of_run(const TrainConfig& c) {
  plan::PlanLayout L;
  L.par = c.par;
  L.precision = c.precision();
  L.engine = true;
  L.flash_attention = true;  // blockwise attention: the score matrices are never stored
  L.overlap_grad_reduce = c.overlap_grad_reduce;
  L.overlap_param_gather = c.overlap_param_gather;
  return L;
}

TrainKeys model_keys(const GPTConfig& m) {
  TrainKeys k{integer("num-layers", m.num_layers), integer("hidden-size", m.hidden_size),
              integer("num-attention-heads", m.num_heads), integer("seq-length", m.seq_length),
              integer("vocab-size", m.vocab_size)};
  if (m.ffn_hidden_size > 0) k.push_back(integer("ffn-hidden-size", m.ffn_hidden_size));
  if (m.max_position_embeddings > 0)
    k.push_back(integer("max-position-embeddings", m.max_position_embeddings));
  if (m.make_vocab_size_divisible_by != GPTConfig{}.make_vocab_size_divisible_by)
    k.push_back(integer("make-vocab-size-divisible-by", m.make_vocab_size_divisible_by));
  // The Llama family's switches, each only where it differs from GPT-2.
  const GPTConfig gpt;
  if (m.rmsnorm()) k.push_back(string("normalization", "RMSNorm"));
  if (m.norm_epsilon != gpt.norm_epsilon) k.push_back(number("norm-epsilon", m.norm_epsilon));
  if (m.swiglu) k.push_back(flag("swiglu", true));
  if (m.rope()) {
    k.push_back(string("position-embedding-type", "rope"));
    k.push_back(number("rotary-base", m.rotary_base));
  }
  if (m.num_query_groups > 0) {
    k.push_back(flag("group-query-attention", true));
    k.push_back(integer("num-query-groups", m.num_query_groups));
  }
  if (m.untie_embeddings) k.push_back(flag("untie-embeddings-and-output-weights", true));
  if (!m.add_bias_linear) k.push_back(flag("disable-bias-linear", true));
  return k;
}

TrainKeys layout_keys(const plan::PlanLayout& L) {
  const ParallelConfig& p = L.par;
  TrainKeys k{integer("tensor-model-parallel-size", p.tp),
              integer("pipeline-model-parallel-size", p.pp),
              integer("micro-batch-size", p.micro_batch),
              integer("global-batch-size", p.global_batch),
              integer("zero-stage", p.zero_stage),
              string("recompute-granularity", recompute_name(p.recompute)),
              flag("sequence-parallel", p.sequence_parallel),
              string("pipeline-schedule", schedule_kind_name(p.schedule))};
  if (p.schedule == ScheduleKind::Interleaved)
    k.push_back(integer("virtual-pipeline-stages", p.virtual_stages));
  if (p.first_stage_layers)
    k.push_back(integer("decoder-first-pipeline-num-layers", *p.first_stage_layers));
  if (p.last_stage_layers)
    k.push_back(integer("decoder-last-pipeline-num-layers", *p.last_stage_layers));
  k.push_back(flag("overlap-grad-reduce", L.overlap_grad_reduce));
  k.push_back(flag("overlap-param-gather", L.overlap_param_gather));
  return k;
}

bool is_layout_key(const std::string& key) {
  return std::find(std::begin(kLayoutKeys), std::end(kLayoutKeys), key) != std::end(kLayoutKeys);
}

TrainKeys non_layout_keys_of_file(const std::string& path) {
  toml::table table;
  try {
    const std::string text = read_toml_text(path, "--config");
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail("config {}: {} (line {})", path, e.description(), e.source().begin.line);
  }
  TrainKeys out;
  for (const auto& [k, v] : table) {
    const std::string key(k.str());
    if (is_layout_key(key)) continue;
    // The kinds `tessera train --config` accepts (config_file.cpp); it has
    // already read this file, so nothing else occurs.
    TrainKey t{key, TrainKey::Kind::Toml, "", ""};
    if (auto s = v.as_string()) {
      t.kind = TrainKey::Kind::String, t.value = s->get();
    } else if (auto b = v.as_boolean()) {
      t.kind = TrainKey::Kind::Flag, t.value = b->get() ? "true" : "false";
    } else if (auto i = v.as_integer()) {
      t.kind = TrainKey::Kind::Integer, t.value = std::to_string(i->get());
    } else if (auto f = v.as_floating_point()) {
      // The shortest text that reads back the same double; in TOML a float
      // needs a '.' or an exponent (or is inf / nan).
      t.flag_value = fmt::format("{}", f->get());
      t.value = t.flag_value.find_first_of(".eEn") == std::string::npos ? t.flag_value + ".0"
                                                                         : t.flag_value;
    } else {
      fail("config {}: key '{}' must be a string, number or boolean", path, key);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string_view("-_./,:=+@%").find(ch) !=
                                                               std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string wrapped_command(const std::string& head, const std::vector<std::string>& words) {
  std::string out = "  " + head, line = out;
  for (const std::string& w : words) {
    if (line.size() + 1 + w.size() + 2 > 100) {
      out += " \\\n   ";
      line = "   ";
    }
    out += " " + w;
    line += " " + w;
  }
  return out + "\n";
}

std::string train_command(const TrainKeys& keys) {
  std::vector<std::string> words;
  for (const TrainKey& k : keys) {
    if (k.kind == TrainKey::Kind::Flag) {
      if (k.value == "true") words.push_back("--" + k.key);
      continue;
    }
    const std::string& v = k.kind == TrainKey::Kind::Toml ? k.flag_value : k.value;
    words.push_back("--" + k.key + " " + shell_word(v));
  }
  return wrapped_command("tessera train", words);
}

std::string train_config_toml(const TrainKeys& keys, const std::string& header) {
  std::string out;
  std::istringstream lines(header);
  for (std::string l; std::getline(lines, l);) out += "# " + l + "\n";
  for (const TrainKey& k : keys) {
    std::string v = k.value;
    if (k.kind == TrainKey::Kind::String) v = toml_string(k.value);
    out += fmt::format("{} = {}\n", k.key, v);
  }
  return out;
}

void print_dry_run(const TrainConfig& c, int64_t ranks, int64_t threads,
                   const std::string& system) {
  plan::SystemSpec sys = plan::load_system(system.empty() ? "local" : system);
  if (system.empty())
    use_run_calibration(sys, {c.model, c.par.micro_batch, c.par.tp, ranks, threads,
                              c.precision()});
  const plan::PlanLayout L = layout_of_run(c);
  plan::LayoutCost cost;
  try {
    cost = plan::evaluate_layout(c.model, sys, L);
  } catch (const Error& e) {
    fail("--dry-run: the planner cannot price this layout: {}", e.what());
  }
  fmt::print("dry run: {} rank(s) planned on system '{}' ({}); nothing allocated\n", ranks,
             sys.name, sys.source);
  fmt::print("layout: {}\n", L.str());
  fmt::print("model: {}\n", c.model.summary());
  fmt::print("{}", plan::format_breakdown(cost, sys));
  fmt::print("memory per rank: {:.3f} GB at the peak (stage {}), {:.3f} GB usable: {}\n",
             cost.peak_memory / 1e9, cost.peak_stage, sys.usable_memory() / 1e9,
             cost.fits ? "fits" : plan::over_memory_text(cost));
  fmt::print("predicted step: {:.4f} s, {:.0f} tokens/s\n", cost.time.step, cost.tokens_per_second);
  const std::string warning = plan::calibration_mismatch(sys, ranks, threads);
  if (!warning.empty()) fmt::print("warning: {}\n", warning);
  if (const std::string w = plan::shared_core_calibration(sys); !w.empty())
    fmt::print("warning: {}\n", w);
}

}  // namespace tessera::cli
