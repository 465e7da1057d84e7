#include "tessera/plan/run_metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tessera/config/config_json.h"
#include "tessera/core/error.h"

namespace tessera::plan {

using nlohmann::json;

namespace {

MemoryBytes memory_from_json(const json& j, const std::string& where) {
  TESSERA_CHECK(j.is_object(), "{}: memory_bytes entries must be objects", where);
  auto get = [&](const char* key) {
    TESSERA_CHECK(j.contains(key) && j[key].is_number(), "{}: memory_bytes needs a number '{}'",
                  where, key);
    return j[key].get<double>();
  };
  return {get("params"), get("grads"), get("optimizer"), get("activations")};
}

void read_header(const json& run, RunMetrics& r, const std::string& where) {
  TESSERA_CHECK(run.is_object() && run.contains("model") && run.contains("parallel"),
                "{}: the run header needs \"model\" and \"parallel\"", where);
  try {
    r.model = model_from_json(run["model"]);
    r.par = parallel_from_json(run["parallel"]);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
  // Typed like every field here: a wrong type is this file's error, not an
  // abort (nlohmann's value() throws type_error).
  for (const char* key : {"threads", "rank"})
    TESSERA_CHECK(!run.contains(key) || run[key].is_number_integer(),
                  "{}: the run header's \"{}\" must be an integer", where, key);
  for (const char* key : {"system", "precision"})
    TESSERA_CHECK(!run.contains(key) || run[key].is_string(),
                  "{}: the run header's \"{}\" must be a string", where, key);
  for (const char* key : {"overlap_grad_reduce", "overlap_param_gather"})
    TESSERA_CHECK(!run.contains(key) || run[key].is_boolean(),
                  "{}: the run header's \"{}\" must be true or false", where, key);
  r.overlap_grad_reduce = run.value("overlap_grad_reduce", false);
  r.overlap_param_gather = run.value("overlap_param_gather", false);
  r.threads = run.value("threads", 0);
  r.rank = run.value("rank", int64_t(0));
  r.system = run.value("system", std::string());
  r.precision = run.value("precision", std::string("fp32"));
  TESSERA_CHECK(r.precision == "fp32" || r.precision == "bf16" || r.precision == "fp16",
                "{}: unknown precision '{}' (fp32, bf16 or fp16)", where, r.precision);
  if (run.contains("memory_bytes")) {
    const json& m = run["memory_bytes"];
    if (m.is_array()) {
      TESSERA_CHECK(!m.empty(), "{}: memory_bytes is an empty list", where);
      for (const auto& rank : m) {
        MemoryBytes x = memory_from_json(rank, where);
        if (!r.memory || x.total() > r.memory->total()) r.memory = x;
      }
    } else {
      r.memory = memory_from_json(m, where);
    }
  }
}

}  // namespace

RunMetrics read_run_metrics(const std::string& path) {
  std::ifstream in(path);
  TESSERA_CHECK(bool(in), "cannot open metrics file '{}'", path);
  RunMetrics r;
  r.path = path;
  bool header = false;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      fail("{}: not JSON ({})", where, e.what());
    }
    if (j.contains("run")) {
      TESSERA_CHECK(!header, "{}: a second run header", where);
      read_header(j["run"], r, where);
      header = true;
      continue;
    }
    TESSERA_CHECK(header, "{}: no run header before the first step; `tessera train --metrics-file` "
                  "writes {{\"run\": {{\"model\", \"parallel\", ...}}}} as the first line",
                  where);
    TESSERA_CHECK(j.contains("step_seconds") && j["step_seconds"].is_number(),
                  "{}: a step line needs a number \"step_seconds\"", where);
    r.steps.push_back(j.value("step", int64_t(r.steps.size() + 1)));
    r.step_seconds.push_back(j["step_seconds"].get<double>());
    Profile ops;
    if (j.contains("seconds_by_op") && j["seconds_by_op"].is_object())
      for (size_t k = 0; k < size_t(Op::kCount); ++k) {
        const auto it = j["seconds_by_op"].find(std::string(op_name(Op(k))));
        if (it != j["seconds_by_op"].end() && it->is_number()) ops.seconds[k] = it->get<double>();
      }
    r.step_ops.push_back(ops);
    auto number = [&](const char* key) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number() ? it->get<double>() : std::nan("");
    };
    r.loss.push_back(number("loss"));
    r.valid_loss.push_back(number("valid_loss"));
    r.tokens.push_back(number("tokens"));
    r.tokens_per_second.push_back(number("tokens_per_second"));
    r.mfu.push_back(number("mfu"));
    double worst = std::nan("");
    if (const auto it = j.find("moe_imbalance"); it != j.end() && it->is_object())
      for (const auto& [layer, v] : it->items())
        if (v.is_number()) worst = std::isnan(worst) ? v.get<double>() : std::max(worst, v.get<double>());
    r.moe_imbalance.push_back(worst);
  }
  TESSERA_CHECK(header, "{}: empty, or no run header", path);
  TESSERA_CHECK(!r.step_seconds.empty(), "{}: no steps", path);
  return r;
}

namespace {

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

}  // namespace

void check_enough_steps(const RunMetrics& r, size_t skip) {
  TESSERA_CHECK(r.step_seconds.size() > skip,
                "{}: {} step(s), need more than the {} warm-up steps skipped", r.path,
                r.step_seconds.size(), skip);
}

double median_step_seconds(const RunMetrics& r, size_t skip) {
  check_enough_steps(r, skip);
  return median(std::vector<double>(r.step_seconds.begin() + long(skip), r.step_seconds.end()));
}

Profile median_step_ops(const RunMetrics& r, size_t skip) {
  check_enough_steps(r, skip);
  Profile out;
  for (size_t k = 0; k < size_t(Op::kCount); ++k) {
    std::vector<double> t;
    for (size_t i = skip; i < r.step_ops.size(); ++i) t.push_back(r.step_ops[i].seconds[k]);
    out.seconds[k] = median(std::move(t));
  }
  return out;
}

double median_moe_imbalance(const RunMetrics& r, size_t skip) {
  std::vector<double> v;
  for (size_t i = skip; i < r.moe_imbalance.size(); ++i)
    if (!std::isnan(r.moe_imbalance[i])) v.push_back(r.moe_imbalance[i]);
  return v.empty() ? 0.0 : median(std::move(v));
}

RunMetrics pool_runs(const std::vector<RunMetrics>& repeats, size_t skip) {
  TESSERA_CHECK(!repeats.empty(), "pool_runs: no runs");
  RunMetrics pooled = repeats.front();
  pooled.steps.clear();
  pooled.step_seconds.clear();
  pooled.step_ops.clear();
  pooled.moe_imbalance.clear();
  for (const auto& r : repeats) {
    check_enough_steps(r, skip);
    for (size_t i = skip; i < r.step_seconds.size(); ++i) {
      pooled.steps.push_back(r.steps[i]);
      pooled.step_seconds.push_back(r.step_seconds[i]);
      pooled.step_ops.push_back(r.step_ops[i]);
      if (i < r.moe_imbalance.size()) pooled.moe_imbalance.push_back(r.moe_imbalance[i]);
    }
  }
  if (repeats.size() > 1)
    pooled.path = fmt::format("{} (+{} repeats)", repeats.front().path, repeats.size() - 1);
  return pooled;
}

}  // namespace tessera::plan
