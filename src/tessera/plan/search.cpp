#include "tessera/plan/search.h"

#include <algorithm>
#include <chrono>

#include "tessera/core/error.h"

namespace tessera::plan {

namespace {

// Ascending; pairs (d, n / d) up to sqrt(n), so a large device count or
// global batch costs thousands of steps, not millions.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// The plan command's ranges, before any of them divides: --devices and
// --global-batch-size bounded far above any machine or batch in use (2^24),
// every listed degree >= 1.
constexpr int64_t kMaxCount = int64_t(1) << 24;

void check_space(const SearchSpace& sp) {
  TESSERA_CHECK(sp.devices >= 1 && sp.devices <= kMaxCount, "--devices must be in [1, {}] (got {})",
                kMaxCount, sp.devices);
  TESSERA_CHECK(sp.global_batch >= 1 && sp.global_batch <= kMaxCount,
                "--global-batch-size must be in [1, {}] (got {})", kMaxCount, sp.global_batch);
  for (const auto& [values, flag] :
       {std::pair{&sp.tp, "--tp"}, {&sp.pp, "--pp"}, {&sp.micro_batch, "--micro-batch"},
        {&sp.virtual_stages, "--virtual-stages"}})
    for (int64_t v : *values)
      TESSERA_CHECK(v >= 1, "{} must be >= 1 (got {})", flag, v);
  for (int z : sp.zero_stages)
    TESSERA_CHECK(z >= 0 && z <= 3, "--zero must be 0, 1, 2 or 3 (got {})", z);
}

bool better(const LayoutCost& a, const LayoutCost& b) {
  // Within 0.01 % the step times are a tie; then the smaller memory wins.
  if (std::abs(a.time.step - b.time.step) > 1e-4 * std::min(a.time.step, b.time.step))
    return a.time.step < b.time.step;
  return a.peak_memory < b.peak_memory;
}

}  // namespace

std::vector<PlanLayout> enumerate_layouts(const GPTConfig& m, const SystemSpec& sys,
                                          const SearchSpace& sp) {
  check_space(sp);
  std::vector<PlanLayout> out;
  const int64_t N = sp.devices;
  std::vector<int64_t> tps = sp.tp.empty() ? divisors(N) : sp.tp;
  std::vector<int64_t> pps = sp.pp.empty() ? divisors(N) : sp.pp;
  for (int64_t tp : tps) {
    if (N % tp || m.num_heads % tp || m.hidden_size % tp || m.ffn() % tp) continue;
    if (sp.tp_within_node && sp.tp.empty() && tp > sys.devices_per_node) continue;
    for (int64_t pp : pps) {
      if ((N / tp) % pp || m.num_layers % pp) continue;
      const int64_t dp = N / (tp * pp);
      if (sp.global_batch % dp) continue;
      const int64_t per_replica = sp.global_batch / dp;
      std::vector<int64_t> mbs = sp.micro_batch;
      if (mbs.empty())
        for (int64_t b : divisors(per_replica))
          if (b <= sp.max_micro_batch) mbs.push_back(b);
      for (int64_t b : mbs) {
        if (per_replica % b) continue;
        const int64_t micro_batches = per_replica / b;
        for (ScheduleKind kind : sp.schedules) {
          std::vector<int64_t> vs{1};
          if (kind == ScheduleKind::Interleaved) {
            if (pp < 2 || micro_batches % pp) continue;
            vs.clear();
            for (int64_t v : sp.virtual_stages.empty() ? divisors(m.num_layers / pp)
                                                       : sp.virtual_stages)
              if (v >= 2 && v <= sp.max_virtual_stages && (m.num_layers / pp) % v == 0)
                vs.push_back(v);
          }
          if (kind == ScheduleKind::GPipe && pp == 1) continue;  // the same as 1F1B
          for (int64_t v : vs)
            for (int zero : sp.zero_stages) {
              if (dp == 1 && zero > 0) continue;  // nothing to shard over
              for (Recompute rc : sp.recompute)
                for (bool seq_par : sp.sequence_parallel) {
                  if (seq_par && (tp == 1 || m.seq_length % tp)) continue;
                  PlanLayout L;
                  L.par.tp = tp;
                  L.par.pp = pp;
                  L.par.dp = dp;
                  L.par.virtual_stages = v;
                  L.par.micro_batch = b;
                  L.par.global_batch = sp.global_batch;
                  L.par.zero_stage = zero;
                  L.par.recompute = rc;
                  L.par.sequence_parallel = seq_par;
                  L.par.schedule = kind;
                  L.precision = sp.precision;
                  L.flash_attention = sp.flash_attention;
                  L.overlap_grad_reduce = sp.overlap_grad_reduce;
                  L.overlap_param_gather = sp.overlap_param_gather && (zero == 1 || zero == 2);
                  L.engine = sp.engine;
                  out.push_back(L);
                }
            }
        }
      }
    }
  }
  return out;
}

SearchResult search_layouts(const GPTConfig& m, const SystemSpec& sys, const SearchSpace& sp) {
  const auto t0 = std::chrono::steady_clock::now();
  SearchResult res;
  ParamCounter params(m);
  std::vector<PlanLayout> layouts = enumerate_layouts(m, sys, sp);
  res.candidates = int64_t(layouts.size());
  CostOptions screen;
  screen.simulate_schedule = false;
  screen.all_stages = false;
  std::vector<LayoutCost> fit, miss;
  for (const auto& L : layouts) {
    LayoutCost c = evaluate_layout(m, sys, L, params, screen);
    (c.fits ? fit : miss).push_back(std::move(c));
  }
  res.too_big = int64_t(miss.size());
  std::sort(fit.begin(), fit.end(), better);
  // Refine the best: the engine's schedule simulated, every stage's memory.
  const size_t refine = std::min(fit.size(), size_t(std::max(sp.refine, 1)));
  CostOptions exact;
  std::vector<LayoutCost> refined;
  for (size_t i = 0; i < refine; ++i) {
    LayoutCost c = evaluate_layout(m, sys, fit[i].layout, params, exact);
    if (c.fits) refined.push_back(std::move(c));  // all stages now: may exceed after all
  }
  std::sort(refined.begin(), refined.end(), better);
  res.ranked = std::move(refined);
  for (size_t i = refine; i < fit.size(); ++i) res.ranked.push_back(std::move(fit[i]));
  std::sort(miss.begin(), miss.end(),
            [](const LayoutCost& a, const LayoutCost& b) { return a.peak_memory < b.peak_memory; });
  if (miss.size() > 3) miss.resize(3);
  // They still get a predicted time (and how far over memory they are), as
  // exact as the winners'.
  for (LayoutCost& c : miss) c = evaluate_layout(m, sys, c.layout, params, exact);
  res.closest_misses = std::move(miss);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

std::vector<int64_t> nearby_usable_device_counts(const GPTConfig& m, const SystemSpec& sys,
                                                 const SearchSpace& sp) {
  std::vector<int64_t> out;
  SearchSpace probe = sp;
  // Within 64, or the device count itself, and never more than 4096 away:
  // each probe is a whole enumeration.
  const int64_t reach = std::min<int64_t>(std::max<int64_t>(64, sp.devices), 4096);
  for (int64_t d = 1; d <= reach && out.size() < 2; ++d) {
    for (int64_t n : {sp.devices - d, sp.devices + d}) {
      if (n < 1 || n > kMaxCount) continue;
      probe.devices = n;
      if (!enumerate_layouts(m, sys, probe).empty() &&
          std::find(out.begin(), out.end(), n) == out.end())
        out.push_back(n);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tessera::plan
