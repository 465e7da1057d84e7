#include "tessera/plan/search.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "tessera/config/engine_cp.h"
#include "tessera/config/parallel_fields.h"
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
        {&sp.virtual_stages, "--virtual-stages"}, {&sp.cp, "--cp"}, {&sp.ep, "--ep"}})
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

// Whether the engine would run this layout: ParallelConfig::validate, the
// one statement of the rules (degrees, batch, the model's divisibility by
// tp and pp x v, the schedule). The search asks it rather than repeating
// them; it is asked per (tp, pp), per (micro-batch, schedule, v) and per
// sequence-parallel switch, so few candidates throw.
bool engine_accepts(const ParallelConfig& par, const GPTConfig& m, int64_t world) {
  try {
    par.validate(m, world);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The (first, last) stage layer counts near an even share that
// ParallelConfig::validate's rules for --decoder-first/last-pipeline-
// num-layers allow (0: the flag not given), checked in arithmetic: most
// pairs break them, and an exception per pair would cost the search. Each
// end takes at most the even share (the ends also run the embedding or the
// head) and at least 8 x v layers below it.
std::vector<std::pair<int64_t, int64_t>> uneven_splits(int64_t n, int64_t p, int64_t v) {
  const int64_t even = n / p;
  std::vector<int64_t> ends{0};
  for (int64_t k = std::max<int64_t>(v, (even - 8 * v) / v * v); k <= even; k += v)
    ends.push_back(k);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t f : ends)
    for (int64_t l : ends) {
      if (f == 0 && l == 0) continue;
      const int64_t middle = p - (f > 0) - (l > 0), rest = n - f - l;
      if (middle == 0 ? rest != 0 : rest < middle || rest % middle || (rest / middle) % v) continue;
      out.emplace_back(f, l);
    }
  return out;
}

void set_split(ParallelConfig& par, std::pair<int64_t, int64_t> fl) {
  par.first_stage_layers.reset();
  par.last_stage_layers.reset();
  if (fl.first > 0) par.first_stage_layers = fl.first;
  if (fl.second > 0) par.last_stage_layers = fl.second;
}

// Whether `par` runs on the engine with some split of the layers: even when
// the engine takes it, else (`choose` set: the planner picks the split) the
// allowed uneven split whose largest stage is smallest, set into `par`.
// Why: a pp that does not divide the layers (Llama-3-405B's 126 over 16)
// is a layout Megatron runs with uneven ends; the refinement prices the
// other splits of the winners (best_stage_split).
bool accepts_with_some_split(ParallelConfig& par, const GPTConfig& m, int64_t world, bool choose) {
  if (!choose || par.pp < 2) return engine_accepts(par, m, world);
  set_split(par, {0, 0});
  if (engine_accepts(par, m, world)) return true;
  std::optional<std::pair<int64_t, int64_t>> best;
  int64_t best_max = 0;
  for (const auto& fl : uneven_splits(m.num_layers, par.pp, par.virtual_stages)) {
    const int64_t middle = par.pp - (fl.first > 0) - (fl.second > 0);
    const int64_t largest = std::max({fl.first, fl.second,
                                      middle ? (m.num_layers - fl.first - fl.second) / middle : 0});
    if (!best || largest < best_max) best = fl, best_max = largest;
  }
  if (!best) return false;
  set_split(par, *best);
  if (engine_accepts(par, m, world)) return true;
  set_split(par, {0, 0});
  return false;
}

}  // namespace

bool ep_in_engine_trials() {
  for (const auto& f : parallel_fields())
    if (f.flag != nullptr && std::string_view(f.flag) == flag::ep)
      return f.on(kSurfaceLayout) && f.on(kSurfaceTrial);
  return false;
}

namespace {

// The ep sizes of an MoE model's layout with dp x cp = `ranks`.
std::vector<int64_t> ep_candidates(const GPTConfig& m, const SearchSpace& sp, int64_t ranks) {
  std::vector<int64_t> out;
  if (!m.moe()) return {1};
  if (!sp.ep.empty()) {
    for (int64_t ep : sp.ep)
      if (ranks % ep == 0 && m.num_experts % ep == 0) out.push_back(ep);
    return out;
  }
  out.push_back(1);
  if (sp.engine && !ep_in_engine_trials()) return out;
  for (int64_t ep = 2; ep <= ranks && ep <= m.num_experts; ep *= 2)
    if (ranks % ep == 0 && m.num_experts % ep == 0) out.push_back(ep);
  return out;
}

}  // namespace

std::vector<int64_t> cp_candidates(const GPTConfig& m, const SearchSpace& sp) {
  if (!sp.cp.empty()) return sp.cp;
  std::vector<int64_t> out{1};
  if (m.seq_length < kCpSearchMinSeq) return out;
  for (int64_t cp = 2; cp <= kCpSearchMax; cp *= 2)
    if (sp.devices % cp == 0 && m.seq_length % (2 * cp) == 0) out.push_back(cp);
  return out;
}

PlanLayout best_stage_split(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                            ParamCounter& params, const CostOptions& screen) {
  const int64_t p = L.par.pp, v = L.par.virtual_stages;
  if (p < 2) return L;
  PlanLayout even = L;
  set_split(even.par, {0, 0});
  // An even split the engine refuses (pp does not divide the layers) is
  // no baseline: then the fastest allowed split wins outright.
  const bool even_runs = engine_accepts(even.par, m, L.devices());
  const double even_step = even_runs ? evaluate_layout(m, sys, even, params, screen).time.step
                                     : std::numeric_limits<double>::infinity();
  PlanLayout best = even_runs ? even : L;
  double best_step = even_step;
  for (const auto& fl : uneven_splits(m.num_layers, p, v)) {
    PlanLayout c = even;
    set_split(c.par, fl);
    if (!engine_accepts(c.par, m, L.devices())) continue;
    const LayoutCost cost = evaluate_layout(m, sys, c, params, screen);
    if (cost.fits && cost.time.step < best_step) best_step = cost.time.step, best = c;
  }
  if (!even_runs) return best;
  return best_step < 0.995 * even_step ? best : even;
}

std::vector<PlanLayout> enumerate_layouts(const GPTConfig& m, const SystemSpec& sys,
                                          const SearchSpace& sp) {
  check_space(sp);
  std::vector<PlanLayout> out;
  const int64_t N = sp.devices;
  // The planner picks each layout's split unless the run fixed one.
  const bool choose_split = sp.uneven_stages && !sp.first_stage_layers && !sp.last_stage_layers;
  std::vector<int64_t> tps = sp.tp.empty() ? divisors(N) : sp.tp;
  std::vector<int64_t> pps = sp.pp.empty() ? divisors(N) : sp.pp;
  for (int64_t cp : cp_candidates(m, sp))
  for (int64_t tp : tps) {
    // Planner-only: tp stays on the fast intra-node links unless asked.
    if (sp.tp_within_node && sp.tp.empty() && tp > sys.devices_per_node) continue;
    for (int64_t pp : pps) {
      if (N % (tp * cp * pp)) continue;  // no whole data-parallel size to try
      ParallelConfig par;
      par.tp = tp;
      par.pp = pp;
      par.cp = cp;
      par.cp_comm = sp.cp_comm;
      par.dp = N / (tp * cp * pp);
      par.global_batch = sp.global_batch;
      par.first_stage_layers = sp.first_stage_layers;
      par.last_stage_layers = sp.last_stage_layers;
      // The degrees with the smallest micro-batch: if the engine refuses
      // this (with any split the planner may choose), it refuses every
      // micro-batch, schedule and mode of (tp, pp).
      if (!accepts_with_some_split(par, m, N, choose_split)) continue;
      const int64_t per_replica = sp.global_batch / par.dp;
      std::vector<int64_t> mbs = sp.micro_batch;
      if (mbs.empty())
        for (int64_t b : divisors(per_replica))
          if (b <= sp.max_micro_batch) mbs.push_back(b);
      for (int64_t b : mbs) {
        par.micro_batch = b;
        for (ScheduleKind kind : sp.schedules) {
          // Planner-only: with one stage GPipe and ZB-H1 are 1F1B.
          if ((kind == ScheduleKind::GPipe || kind == ScheduleKind::ZeroBubbleH1) && pp == 1)
            continue;
          par.schedule = kind;
          // zbv: two chunks per rank in its V, always.
          std::vector<int64_t> vs{kind == ScheduleKind::ZeroBubbleV ? 2 : 1};
          if (kind == ScheduleKind::Interleaved) {
            vs.clear();
            for (int64_t v : sp.virtual_stages.empty() ? divisors(m.num_layers) : sp.virtual_stages)
              if (v >= 2 && v <= sp.max_virtual_stages) vs.push_back(v);
          }
          for (int64_t v : vs) {
            par.virtual_stages = v;
            par.sequence_parallel = false;
            par.zero_stage = 0;
            par.recompute = Recompute::None;
            if (!accepts_with_some_split(par, m, N, choose_split)) continue;
            // With SP the engine also needs T % tp == 0.
            par.sequence_parallel = true;
            // (With cp each rank's T / cp tokens split over tp.)
            const bool sp_ok = tp > 1 && (m.seq_length / cp) % tp == 0 && engine_accepts(par, m, N);
            for (int zero : sp.zero_stages) {
              if (par.dp * cp == 1 && zero > 0) continue;  // planner-only: nothing to shard over
              for (Recompute rc : sp.recompute)
                for (bool seq_par : sp.sequence_parallel) {
                  if (seq_par && !sp_ok) continue;  // tp 1 (planner-only: nothing to split) or T % tp
                  // What `tessera train` refuses zb-h1 and zbv with (checked
                  // here rather than by an exception per candidate): an MoE
                  // model (its backward is not split yet).
                  if (splits_backward(kind) && m.moe()) continue;
                  // What `tessera train` refuses cp > 1 with (sequence
                  // parallelism, the interleaved and zero-bubble schedules,
                  // MoE): the engine's runs leave it out, so tune never
                  // launches a layout train refuses.
                  if (sp.engine && cp > 1) {
                    ParallelConfig with = par;
                    with.sequence_parallel = seq_par;
                    if (cp_unsupported_in_engine(with, m)) continue;
                  }
                  for (int64_t ep : ep_candidates(m, sp, par.dp * cp)) {
                    PlanLayout L;
                    L.par = par;
                    L.par.zero_stage = zero;
                    L.par.recompute = rc;
                    L.par.sequence_parallel = seq_par;
                    L.precision = sp.precision;
                    L.fp8 = sp.fp8;
                    L.flash_attention = sp.flash_attention;
                    L.overlap_grad_reduce = sp.overlap_grad_reduce;
                    L.overlap_param_gather = sp.overlap_param_gather && (zero == 1 || zero == 2);
                    L.tp_comm_overlap = sp.tp_comm_overlap && seq_par;
                    L.engine = sp.engine;
                    out.push_back(L);
                    out.back().par.ep = ep;
                  }
                }
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
  const bool choose_split = sp.uneven_stages && !sp.first_stage_layers && !sp.last_stage_layers;
  std::vector<LayoutCost> refined;
  for (size_t i = 0; i < refine; ++i) {
    const PlanLayout L = choose_split ? best_stage_split(m, sys, fit[i].layout, params, screen)
                                      : fit[i].layout;
    LayoutCost c = evaluate_layout(m, sys, L, params, exact);
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
