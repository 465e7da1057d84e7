#include "tessera/plan/system.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <toml++/toml.h>

#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"

namespace tessera::plan {
namespace fs = std::filesystem;

namespace {

// What a numeric field may hold. Every number is finite (nan and inf plan
// nothing); an impossible one (a zero bandwidth, a zero tile) would divide
// by zero or print nan, so each field is range-checked where it is read.
enum class Range {
  positive,      // > 0
  non_negative,  // >= 0
  fraction,      // in (0, 1]
};

// The number at `key` of `t` (at `where` in `file`), or nullopt when absent:
// a present key must hold a number in `range`, a whole one when `integer`
// (and below 2^53, so int64_t(v) is exact). Throws naming file and key.
std::optional<double> read_number(const toml::table& t, const std::string& key,
                                  const std::string& where, const std::string& file, Range range,
                                  bool integer) {
  const toml::node_view<const toml::node> node = t[key];
  if (!node) return std::nullopt;
  const std::optional<double> v = node.value<double>();
  TESSERA_CHECK(v.has_value(), "{}: '{}{}' must be a number", file, where, key);
  const double x = *v;
  const char* want = range == Range::positive ? "> 0" : range == Range::non_negative ? ">= 0" : "in (0, 1]";
  const bool in_range = std::isfinite(x) && (range == Range::positive       ? x > 0
                                             : range == Range::non_negative ? x >= 0
                                                                           : x > 0 && x <= 1);
  TESSERA_CHECK(in_range, "{}: '{}{}' must be a finite number {} (got {})", file, where, key, want, x);
  TESSERA_CHECK(!integer || (x == std::floor(x) && x < 9007199254740992.0),
                "{}: '{}{}' must be a whole number below 2^53 (got {})", file, where, key, x);
  return x;
}

// Required numeric field `key` of `table` (at `where` in `file`).
double need_number(const toml::table& t, const std::string& key, const std::string& where,
                   const std::string& file, Range range = Range::positive, bool integer = false) {
  auto v = read_number(t, key, where, file, range, integer);
  TESSERA_CHECK(v.has_value(), "{}: missing or non-numeric field '{}{}'", file, where, key);
  return *v;
}

// Optional numeric field: `fallback` when absent, checked like need_number when present.
double get_number(const toml::table& t, const std::string& key, double fallback,
                  const std::string& where, const std::string& file, Range range = Range::positive,
                  bool integer = false) {
  return read_number(t, key, where, file, range, integer).value_or(fallback);
}

const toml::table& need_table(const toml::table& t, const std::string& key,
                              const std::string& file) {
  const toml::table* sub = t[key].as_table();
  TESSERA_CHECK(sub != nullptr, "{}: missing table [{}]", file, key);
  return *sub;
}

// The index i < count whose name(i) is `key`, or count when none is.
template <typename Name>
size_t index_of_name(std::string_view key, size_t count, Name name) {
  size_t i = 0;
  while (i < count && name(i) != key) ++i;
  return i;
}

SystemSpec system_from_toml(const toml::table& root, const std::string& path);

}  // namespace

SystemSpec load_system_file(const std::string& path) {
  toml::table root;
  try {
    const std::string text = read_toml_text(path, "system file");
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail("{}: TOML parse error at line {}: {}", path, e.source().begin.line, e.description());
  }
  return system_from_toml(root, path);
}

SystemSpec load_system_text(const std::string& text, const std::string& name) {
  check_toml_key_depth(text, name);
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    fail("{}: TOML parse error at line {}: {}", name, e.source().begin.line, e.description());
  }
  return system_from_toml(root, name);
}

namespace {

// [device]: memory, bandwidth, peak rates.
void read_device(SystemSpec& s, const toml::table& root, const std::string& path) {
  const auto& dev = need_table(root, "device", path);
  s.device_name = dev["name"].value<std::string>().value_or("device");
  s.memory_bytes = need_number(dev, "memory_GB", "device.", path) * 1e9;
  s.memory_bandwidth = need_number(dev, "memory_bandwidth_GBps", "device.", path) * 1e9;
  s.memory_efficiency = need_number(dev, "memory_efficiency", "device.", path);  // <= 1 below
  TESSERA_CHECK(s.memory_efficiency > 0 && s.memory_efficiency <= 1,
                "{}: device.memory_efficiency must be in (0, 1] (the fraction of "
                "memory_bandwidth_GBps a STREAM-like kernel reaches; 1 when the bandwidth is "
                "itself measured)",
                path);
  s.reserved_bytes = get_number(dev, "reserved_GB", 0.0, "device.", path, Range::non_negative) * 1e9;
  s.compute_units = int64_t(get_number(dev, "compute_units", 1, "device.", path, Range::positive, true));
  // Optional: 1 unless the file cites the clock its device sustains under load.
  s.sustained_clock =
      get_number(dev, "sustained_clock_fraction", 1.0, "device.", path, Range::fraction);
  // Optional: 0 unless the file cites how much same-SKU devices differ in speed.
  s.device_speed_spread = get_number(dev, "speed_spread", 0.0, "device.", path, Range::non_negative);
  TESSERA_CHECK(s.device_speed_spread < 0.25,
                "{}: device.speed_spread must be below 0.25 (a standard deviation of device "
                "speed as a fraction of the mean)", path);
  const toml::table* peak = dev["peak_TFLOPs"].as_table();
  TESSERA_CHECK(peak != nullptr, "{}: missing field 'device.peak_TFLOPs' (e.g. {{ bf16 = 191.5 }})",
                path);
  const double fp16 = get_number(*peak, "fp16", 0, "device.peak_TFLOPs.", path);
  const double bf16 = get_number(*peak, "bf16", 0, "device.peak_TFLOPs.", path);
  const double p32 = get_number(*peak, "fp32", 0, "device.peak_TFLOPs.", path);
  TESSERA_CHECK(fp16 > 0 || bf16 > 0 || p32 > 0,
                "{}: 'device.peak_TFLOPs' needs at least one of bf16, fp16 or fp32", path);
  // A precision the file does not list runs at one it does; a CPU without
  // 16-bit units computes them at its fp32 rate.
  s.peak_flops_bf16 = (bf16 > 0 ? bf16 : fp16 > 0 ? fp16 : p32) * 1e12;
  s.peak_flops_fp16 = (fp16 > 0 ? fp16 : bf16 > 0 ? bf16 : p32) * 1e12;
  s.peak_flops_32 = (p32 > 0 ? p32 : bf16 > 0 ? bf16 : fp16) * 1e12;
  // fp8 never stands in for another precision, nor they for it.
  // 0 (or absent): no fp8 units.
  s.peak_flops_fp8 = get_number(*peak, "fp8", 0, "device.peak_TFLOPs.", path, Range::non_negative) * 1e12;
}

// [node]: devices per node, overlap, synchronisation wait.
void read_node(SystemSpec& s, const toml::table& root, const std::string& path) {
  const auto& node = need_table(root, "node", path);
  s.devices_per_node = int64_t(need_number(node, "devices", "node.", path, Range::positive, true));
  TESSERA_CHECK(s.devices_per_node >= 1, "{}: node.devices must be >= 1", path);
  if (const auto v = node["comm_overlap"].value<double>()) s.comm_overlap = *v;
  TESSERA_CHECK(!node["comm_overlap"] || node["comm_overlap"].value<double>(),
                "{}: 'node.comm_overlap' must be a number", path);
  s.sync_wait = get_number(node, "sync_wait_us", 0.0, "node.", path, Range::non_negative) * 1e-6;
  TESSERA_CHECK(s.comm_overlap >= -1 && s.comm_overlap <= 1,
                "{}: node.comm_overlap must be in [-1, 1] (the fraction of a collective compute "
                "hides; below 0: overlapping costs extra)",
                path);
  TESSERA_CHECK(s.sync_wait >= 0, "{}: node.sync_wait_us must be >= 0", path);
}

// [[gemm.KEY]] entries: measured GEMM shapes and their rates.
std::vector<GemmSample> read_gemm_samples(const toml::table& g, const char* key,
                                          const std::string& path) {
  std::vector<GemmSample> out;
  const toml::array* meas = g[key].as_array();
  if (meas == nullptr) return out;
  const std::string where = fmt::format("gemm.{}[].", key);
  for (const auto& node_ : *meas) {
    const toml::table* row = node_.as_table();
    TESSERA_CHECK(row != nullptr, "{}: gemm.{} entries must be tables", path, key);
    GemmSample sm;
    sm.m = int64_t(need_number(*row, "m", where, path, Range::positive, true));
    sm.n = int64_t(need_number(*row, "n", where, path, Range::positive, true));
    sm.k = int64_t(need_number(*row, "k", where, path, Range::positive, true));
    sm.flops = need_number(*row, "TFLOPs", where, path) * 1e12;
    out.push_back(sm);
  }
  return out;
}

// [gemm] (optional): the efficiency model and measured samples.
void read_gemm(SystemSpec& s, const toml::table& root, const std::string& path) {
  const toml::table* g = root["gemm"].as_table();
  if (g == nullptr) return;
  s.gemm_max_efficiency = get_number(*g, "max_efficiency", s.gemm_max_efficiency, "gemm.", path, Range::fraction);
  s.gemm_max_efficiency_fp8 = get_number(*g, "max_efficiency_fp8", s.gemm_max_efficiency, "gemm.",
                                         path, Range::fraction);
  s.tile_m = int64_t(get_number(*g, "tile_m", double(s.tile_m), "gemm.", path, Range::positive, true));
  s.tile_n = int64_t(get_number(*g, "tile_n", double(s.tile_n), "gemm.", path, Range::positive, true));
  s.attention_efficiency = get_number(*g, "attention_efficiency", s.attention_efficiency, "gemm.", path);
  s.attention_backward_efficiency = get_number(*g, "attention_backward_efficiency",
                                               s.attention_backward_efficiency, "gemm.", path, Range::fraction);
  s.triton_attention_rate = get_number(*g, "triton_attention_rate", s.triton_attention_rate, "gemm.", path,
                                       Range::fraction);
  s.triton_attention_backward_rate = get_number(*g, "triton_attention_backward_rate",
                                                s.triton_attention_backward_rate, "gemm.", path, Range::fraction);
  s.attention_causal_speedup = get_number(*g, "causal_speedup", s.attention_causal_speedup, "gemm.", path,
                                          Range::non_negative);
  TESSERA_CHECK(s.attention_causal_speedup == 0 ||
                    (s.attention_causal_speedup >= 1 && s.attention_causal_speedup <= 2),
                "{}: 'gemm.causal_speedup' must be 0 (none) or between 1 and 2 (got {}): skipping the "
                "masked half of the tiles at most halves the time",
                path, s.attention_causal_speedup);
  s.gemm_measured = read_gemm_samples(*g, "measured", path);
  s.gemm_measured_bf16 = read_gemm_samples(*g, "measured_bf16", path);
  s.gemm_measured_fp16 = read_gemm_samples(*g, "measured_fp16", path);
}

// [kernels] (optional): ns per element of each memory-bound kernel.
void read_kernels(SystemSpec& s, const toml::table& root, const std::string& path) {
  const toml::table* k = root["kernels"].as_table();
  if (k == nullptr) return;
  for (const auto& [key, value] : *k) {
    TESSERA_CHECK(is_kernel_rate_key(key.str()),
                  "{}: kernels.{} is not a kernel the planner knows (a Backend call's name: "
                  "layernorm_forward, accumulate, \"matmul_backward.dbias\", ...; or {})",
                  path, key.str(), kAttentionMaskDraw);
    const auto ns = value.value<double>();
    TESSERA_CHECK(ns && *ns > 0 && std::isfinite(*ns), "{}: kernels.{} must be a positive number (ns per element)",
                  path, key.str());
    s.kernel_rates[std::string(key.str())] = *ns * 1e-9;
  }
}

// [[network]]: the tiers, innermost first, each dividing the next.
void read_network(SystemSpec& s, const toml::table& root, const std::string& path) {
  const toml::array* net = root["network"].as_array();
  TESSERA_CHECK(net != nullptr && !net->empty(),
                "{}: missing [[network]] tiers (at least one, the last with ranks = 0)", path);
  for (size_t i = 0; i < net->size(); ++i) {
    const toml::table* t = (*net)[i].as_table();
    TESSERA_CHECK(t != nullptr, "{}: [[network]] entry {} is not a table", path, i);
    std::string where = fmt::format("network[{}].", i);
    NetworkTier tier;
    tier.name = (*t)["name"].value<std::string>().value_or(fmt::format("tier{}", i));
    tier.ranks = int64_t(need_number(*t, "ranks", where, path, Range::non_negative, true));
    tier.bandwidth = need_number(*t, "bandwidth_GBps", where, path) * 1e9;
    tier.latency = need_number(*t, "latency_us", where, path, Range::non_negative) * 1e-6;
    tier.efficiency = get_number(*t, "efficiency", 1.0, where, path, Range::fraction);
    const char* factor_keys[] = {"all_reduce_factor", "reduce_scatter_factor", "all_gather_factor"};
    for (size_t k = 0; k < 3; ++k) {
      tier.collective_factor[k] = get_number(*t, factor_keys[k], 1.0, where, path);
    }
    if ((*t)["per_node"].value<bool>().value_or(false))
      tier.bandwidth /= double(s.devices_per_node);  // the node's NICs, shared by its devices
    TESSERA_CHECK(tier.bandwidth > 0, "{}: {}bandwidth_GBps must be > 0", path, where);
    s.tiers.push_back(tier);
  }
  for (size_t i = 0; i + 1 < s.tiers.size(); ++i)
    TESSERA_CHECK(s.tiers[i].ranks > 0 && (s.tiers[i + 1].ranks == 0 ||
                                           s.tiers[i + 1].ranks % s.tiers[i].ranks == 0),
                  "{}: network tiers must grow: network[{}].ranks ({}) must divide the next", path,
                  i, s.tiers[i].ranks);
  TESSERA_CHECK(s.tiers.back().ranks == 0,
                "{}: the last [[network]] tier must have ranks = 0 (it joins every node)", path);
}

// One table of in-situ factors (name: its table, for messages).
void read_factors(const toml::table& f, const std::string& table, const std::string& path,
                  Profile& factors) {
  factors = SystemSpec::unit_factors();
  for (const auto& [key, value] : f) {
    const size_t i =
        index_of_name(key.str(), size_t(Op::kCount), [](size_t k) { return op_name(Op(k)); });
    TESSERA_CHECK(i < size_t(Op::kCount) && Op(i) != Op::Comm,
                  "{}: {}.{} is not a kind of compute work (core/profile.h)", path, table,
                  key.str());
    const auto x = value.value<double>();
    TESSERA_CHECK(x && *x > 0 && std::isfinite(*x), "{}: {}.{} must be a positive factor", path, table, key.str());
    factors.seconds[i] = *x;
  }
}

// [in_situ], [in_situ_bf16], [in_situ_fp16] (optional): how much slower
// each kind of compute runs in a step of that precision; [in_situ_mb<B>]
// and [in_situ_mb<B>_<precision>]: the same at micro-batch B (system.h).
void read_in_situ(SystemSpec& s, const toml::table& root, const std::string& path) {
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16}) {
    const std::string table =
        p == Precision::Fp32 ? "in_situ" : fmt::format("in_situ_{}", precision_name(p));
    if (const toml::table* f = root[table].as_table())
      read_factors(*f, table, path, p == Precision::Fp32 ? s.in_situ : s.in_situ_lowp[p]);
  }
  const std::string prefix = "in_situ_mb";
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (!name.starts_with(prefix)) continue;
    const size_t digits = name.find_first_not_of("0123456789", prefix.size());
    const std::string number = name.substr(prefix.size(), digits == std::string::npos
                                                              ? std::string::npos
                                                              : digits - prefix.size());
    const std::string rest = digits == std::string::npos ? "" : name.substr(digits);
    Precision p = Precision::Fp32;
    if (rest == "_bf16") p = Precision::Bf16;
    if (rest == "_fp16") p = Precision::Fp16;
    TESSERA_CHECK(!number.empty() && number.size() <= 9 && (rest.empty() || p != Precision::Fp32) &&
                      node.is_table(),
                  "{}: [{}] is not an in-situ table (in_situ_mb<micro-batch>[_bf16|_fp16])", path,
                  name);
    const int64_t mb = std::stoll(number);
    TESSERA_CHECK(mb >= 1, "{}: [{}]: the micro-batch must be >= 1", path, name);
    read_factors(*node.as_table(), name, path, s.in_situ_at[mb][p]);
  }
}

SystemSpec system_from_toml(const toml::table& root, const std::string& path) {
  SystemSpec s;
  s.source = path;
  s.name = root["name"].value<std::string>().value_or(fs::path(path).stem().string());
  s.description = root["description"].value<std::string>().value_or("");
  s.stack = root["stack"].value<std::string>().value_or("");
  read_device(s, root, path);
  read_node(s, root, path);
  read_gemm(s, root, path);
  read_kernels(s, root, path);
  read_network(s, root, path);
  read_in_situ(s, root, path);
  // [calibration]: the ranks x threads `tessera calibrate` measured with.
  if (const toml::table* cal = root["calibration"].as_table()) {
    s.calibrated_ranks = int64_t(get_number(*cal, "ranks", 0, "calibration.", path, Range::non_negative, true));
    s.calibrated_threads = int64_t(get_number(*cal, "threads", 0, "calibration.", path, Range::non_negative, true));
    s.in_situ_micro_batch =
        int64_t(get_number(*cal, "in_situ_micro_batch", 0, "calibration.", path, Range::non_negative, true));
    s.cores = int64_t(get_number(*cal, "cores", 0, "calibration.", path, Range::non_negative, true));
    s.kernel_ranks = int64_t(get_number(*cal, "kernel_ranks", 0, "calibration.", path, Range::non_negative, true));
    TESSERA_CHECK(s.calibrated_ranks >= 0 && s.calibrated_threads >= 0 && s.cores >= 0,
                  "{}: calibration.ranks, calibration.threads and calibration.cores must be >= 0",
                  path);
    TESSERA_CHECK(s.kernel_ranks >= 0 && s.kernel_ranks <= s.calibrated_ranks,
                  "{}: calibration.kernel_ranks must be in [0, calibration.ranks = {}] (got {})",
                  path, s.calibrated_ranks, s.kernel_ranks);
  }
  TESSERA_CHECK(s.in_situ_at.empty() || s.in_situ_micro_batch >= 1,
                "{}: [in_situ_mb<B>] tables need calibration.in_situ_micro_batch (the micro-batch of "
                "[in_situ])",
                path);
  return s;
}

}  // namespace

std::string config_dir() {
  if (const char* env = std::getenv("TESSERA_CONFIG_DIR")) return env;
  if (fs::is_directory("configs/systems")) return "configs";
  // Next to the binary: build dirs live one or two levels below the checkout.
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    fs::path dir = fs::path(buf).parent_path();
    for (int up = 0; up < 4; ++up, dir = dir.parent_path())
      if (fs::is_directory(dir / "configs" / "systems")) return (dir / "configs").string();
  }
  return "configs";
}

std::string user_systems_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path cache = xdg && *xdg ? fs::path(xdg) : fs::path(home && *home ? home : ".") / ".cache";
  return (cache / "tessera" / "systems").string();
}

namespace {

// The directories a system name is looked up in, first match wins.
std::vector<fs::path> system_dirs() {
  return {fs::path(user_systems_dir()), fs::path(config_dir()) / "systems"};
}

}  // namespace

std::vector<std::string> list_systems() {
  std::vector<std::string> out;
  for (const fs::path& dir : system_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".toml") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string find_system_file(const std::string& name) {
  for (const fs::path& dir : system_dirs()) {
    std::error_code ec;
    const fs::path p = dir / (name + ".toml");
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

SystemSpec load_system(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml")) {
    TESSERA_CHECK(fs::exists(name_or_path), "--system: no such file '{}'", name_or_path);
    return load_system_file(name_or_path);
  }
  const std::string file = find_system_file(name_or_path);
  if (file.empty()) {
    std::string known;
    for (const auto& s : list_systems()) known += (known.empty() ? "" : ", ") + s;
    fail("--system: unknown system '{}' (known: {}; or pass a path to a .toml file)",
         name_or_path,
         known.empty() ? "none found in " + config_dir() + "/systems or " + user_systems_dir()
                       : known);
  }
  return load_system_file(file);
}

Profile& SystemSpec::in_situ_for(Precision p, int64_t micro_batch) {
  auto base = [&]() -> Profile& {
    const auto it = in_situ_lowp.find(p);
    return it == in_situ_lowp.end() ? in_situ : it->second;
  };
  if (micro_batch < 1 || in_situ_at.empty() || in_situ_micro_batch < 1) return base();
  // The measured micro-batch nearest this one in ratio; a tie takes the larger.
  auto distance = [&](int64_t b) { return std::abs(std::log(double(micro_batch) / double(b))); };
  int64_t best = in_situ_micro_batch;
  for (const auto& [b, tables] : in_situ_at) {
    const double d = distance(b), d_best = distance(best);
    if (d < d_best - 1e-12 || (std::abs(d - d_best) <= 1e-12 && b > best)) best = b;
  }
  if (best == in_situ_micro_batch) return base();
  std::map<Precision, Profile>& at = in_situ_at[best];
  const auto it = at.find(p);
  if (it != at.end()) return it->second;
  // No step of this precision at that micro-batch: its fp32 step's, as the
  // base tables fall back.
  const auto fp32 = at.find(Precision::Fp32);
  return fp32 != at.end() ? fp32->second : base();
}

std::vector<Profile*> SystemSpec::in_situ_tables(Precision p) {
  std::vector<Profile*> tables{&in_situ_for(p)};
  for (auto& [b, at] : in_situ_at) {
    const auto it = at.find(p);
    if (it != at.end()) tables.push_back(&it->second);
  }
  return tables;
}

}  // namespace tessera::plan
