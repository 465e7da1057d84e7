// Pipeline time of one step from per-chunk costs: exactly, by simulating the
// engine's own schedule lists (parallel/schedule.h, schedule_sim.h), or by a
// closed form the search uses to screen thousands of layouts quickly.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/parallel/schedule.h"

namespace tessera::plan {

struct PipelineCosts {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int64_t p = 1, v = 1, m = 1;
  std::vector<double> forward, backward;  // seconds per micro-batch, by GLOBAL chunk (p*v)
  double p2p_seconds = 0;                 // one activation / gradient message
  // Split-backward schedules (zb-h1, zbv): the weight pass's seconds per
  // micro-batch by GLOBAL chunk, within backward (ScheduleCosts::
  // weight_by_chunk); empty: the share weight_share of every chunk's.
  std::vector<double> weight;
  double weight_share = 0.5;
};

struct PipelineTime {
  double seconds = 0;          // first forward starts -> last backward ends
  double busiest = 0;          // the busiest rank's forward + backward time
  double bubble_fraction = 0;  // Narayanan et al. 2021: (T_pipe p - sum busy) / sum busy
  bool simulated = false;
};

// Closed form: T = m * max_r C_r + (sum_r C_r - max_r C_r) / v + 2 (p - 1) p2p,
// C_r = rank r's forward + backward over its chunks for one micro-batch.
// With equal costs it is (m + (p - 1)/v) C: the bubble (p - 1)/(v m) of
// Narayanan et al. 2021 (SC'21, §2.2). ZB-H1 idles F + B - W per stage
// instead of F + B + W (Qi et al. 2024), so its (sum - max) term is scaled
// by (F + B - W) / (F + B + W) of the totals (B, W: backward's two passes;
// W: the chunks' weight passes summed).
PipelineTime pipeline_time_estimate(const PipelineCosts& c);
// The engine's schedule, built by build_pipeline and run by simulate_schedule.
PipelineTime pipeline_time_simulated(const PipelineCosts& c);

}  // namespace tessera::plan
