// Schedule simulator: runs every rank's action list against a cost model
// with the executor's point-to-point semantics (see schedule.h) and reports
// the step time, the bubble, activation high-water marks and a timeline.
// The tests use it with unit costs; the planner with measured or modelled
// ones, so it is linear in the number of actions (p = 128, m = 1024: ~20 ms).
//
// Semantics:
//   - Each rank runs its list in order on one clock.
//   - Forward/Backward take the chunk's cost; ReduceGrads and OptimizerStep
//     their fixed costs (0 by default). A split backward (zb-h1) prices its
//     halves apart: BackwardWeight the chunk's `weight_by_chunk` (else the
//     share `weight_share` of its backward), BackwardInput the rest.
//   - A Send takes no time on the sender (it is an isend) and makes the data
//     available at the receiver p2p_latency later.
//   - A Recv ends at max(now, send time + p2p_latency): the wait.
//   - If no rank can progress and some are not finished, that is a deadlock:
//     the result says so and names the Recv each stuck rank waits on.
//
// Bubble fraction, as in Narayanan et al. 2021 (Megatron-LM, SC'21), bubble
// time over ideal time:
//     bubble = (p * T_pipe - sum_r busy_r) / sum_r busy_r
// where busy_r is rank r's Forward + Backward (+ BackwardWeight) time and T_pipe the time the
// last rank finishes its last pipeline action (the flush; ReduceGrads and
// OptimizerStep are outside it). With equal per-chunk costs every rank's
// busy time is the ideal time, so this is (T_pipe - ideal) / ideal, which is
// exactly (p-1)/m for GPipe and 1F1B and (p-1)/(v*m) for interleaved with
// zero-cost transfers. (Idle over total, (p*T - busy)/(p*T), would instead
// give (p-1)/(m+p-1).) With unequal costs, load imbalance counts as bubble.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/parallel/schedule.h"

namespace tessera {

struct ScheduleCosts {
  double forward = 1.0;   // one micro-batch through one chunk, forward
  double backward = 1.0;  // and backward (2x forward for a real model; 3x with full recompute)
  // Optional per-chunk costs, p*v entries indexed by GLOBAL chunk (the first
  // and last chunks also carry the embedding and the head); override the above.
  std::vector<double> forward_by_chunk;
  std::vector<double> backward_by_chunk;
  // The weight-gradient pass's share of a backward (the dW GEMMs': about
  // half of a layer's backward GEMM time, as dX and dW GEMMs have the same
  // FLOPs), for schedules that split it; in [0, 1]. Backward = B + W, so a
  // split schedule does the same work as an unsplit one.
  double weight_share = 0.5;
  // Optional: the weight pass's seconds per micro-batch by GLOBAL chunk (p*v
  // entries, each at most that chunk's backward); overrides weight_share.
  // A chunk's W is its layers' weight gradients only (the head's and the
  // embedding's stay in B), so one share of the whole backward would give
  // the head's chunk too much W and the others too little.
  std::vector<double> weight_by_chunk;
  double p2p_latency = 0.0;     // send issued -> data usable at the receiver
  double reduce_grads = 0.0;    // per rank
  double optimizer_step = 0.0;  // per rank
};

// One action's interval on a rank's clock: timeline[r][i] is action i of
// rank r's list (after a deadlock, only the actions that ran). A Recv's span
// is its wait; a Send's is empty.
struct SimSpan {
  double start, end;
};

struct SimResult {
  bool deadlock = false;
  std::string deadlock_report;         // one line per stuck rank (at most 8, then a count)
  double makespan = 0.0;               // last action of any rank ends
  double pipeline_time = 0.0;          // T_pipe above: last Forward/Backward/Send/Recv ends
  double bubble_fraction = 0.0;        // see the header comment
  std::vector<double> busy;            // per rank: Forward + Backward (B + W) time
  std::vector<double> finish;          // per rank: when its last action ends (stuck: that ran)
  std::vector<int64_t> peak_in_flight; // per rank: most chunk-activations alive at once
  std::vector<std::vector<SimSpan>> timeline;  // per rank, in list order (if recorded)
};

// Throws tessera::Error on a malformed schedule (a transfer whose peer is
// not the neighbour its chunk boundary implies, a message sent twice, or a
// send nobody receives); a deadlock is reported in the result instead.
SimResult simulate_schedule(const PipelineSchedule& s, const ScheduleCosts& costs = {},
                            bool record_timeline = true);

}  // namespace tessera
