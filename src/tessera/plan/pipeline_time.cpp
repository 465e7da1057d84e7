#include "tessera/plan/pipeline_time.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>

#include "tessera/parallel/schedule_sim.h"

namespace tessera::plan {

namespace {

std::vector<double> per_rank(const PipelineCosts& c) {
  std::vector<double> busy(size_t(c.p), 0.0);
  for (int64_t g = 0; g < c.p * c.v; ++g)
    busy[size_t(chunk_rank(c.p, g, chunk_placement(c.kind)))] += c.forward[size_t(g)] + c.backward[size_t(g)];
  return busy;
}

// Schedules are pure functions of (kind, p, v, m): the search asks for the
// same few again and again, so keep the most recent ones.
std::shared_ptr<const PipelineSchedule> cached_pipeline(ScheduleKind kind, int64_t p, int64_t v,
                                                        int64_t m) {
  using Key = std::tuple<int, int64_t, int64_t, int64_t>;
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<const PipelineSchedule>> cache;
  Key key{int(kind), p, v, m};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 16) cache.clear();
  auto s = std::make_shared<const PipelineSchedule>(build_pipeline(kind, p, v, m));
  cache[key] = s;
  return s;
}

}  // namespace

PipelineTime pipeline_time_estimate(const PipelineCosts& c) {
  std::vector<double> busy = per_rank(c);
  const double sum = std::accumulate(busy.begin(), busy.end(), 0.0);
  const double max = *std::max_element(busy.begin(), busy.end());
  PipelineTime t;
  t.busiest = max * double(c.m);
  double fill = 1.0;  // the part of the other stages' work the pipeline waits for
  // The deferred W's fill the cool-down; zbv's V halves what is left again
  // (/ v below): (p - 1) / (6m) with equal F, B, W, as its greedy list.
  if (splits_backward(c.kind)) {
    const double f = std::accumulate(c.forward.begin(), c.forward.end(), 0.0);
    const double b = std::accumulate(c.backward.begin(), c.backward.end(), 0.0);
    const double w = c.weight.empty()
                         ? b * c.weight_share
                         : std::accumulate(c.weight.begin(), c.weight.end(), 0.0);
    if (f + b > 0) fill = std::max(0.0, (f + (b - w) - w) / (f + b));
  }
  t.seconds = double(c.m) * max + fill * (sum - max) / double(c.v) +
              2.0 * double(c.p - 1) * c.p2p_seconds;
  t.bubble_fraction = (t.seconds * double(c.p) - sum * double(c.m)) / (sum * double(c.m));
  return t;
}

PipelineTime pipeline_time_simulated(const PipelineCosts& c) {
  auto sched = cached_pipeline(c.kind, c.p, c.v, c.m);
  ScheduleCosts costs;
  costs.forward_by_chunk = c.forward;
  costs.backward_by_chunk = c.backward;
  costs.p2p_latency = c.p2p_seconds;
  costs.weight_share = c.weight_share;
  costs.weight_by_chunk = c.weight;
  SimResult r = simulate_schedule(*sched, costs, false);
  PipelineTime t;
  t.seconds = r.pipeline_time;
  t.busiest = *std::max_element(r.busy.begin(), r.busy.end());
  t.bubble_fraction = r.bubble_fraction;
  t.simulated = true;
  return t;
}

}  // namespace tessera::plan
