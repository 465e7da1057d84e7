// Pipeline schedules as data.
//
// A schedule is the list of actions one pipeline rank performs in one
// optimizer step, a pure function of (kind, p, v, m, rank):
//   p    pipeline ranks              (--pipeline-model-parallel-size)
//   v    model chunks per rank       (--virtual-pipeline-stages; 1 unless interleaved)
//   m    micro-batches per step      (global batch / (micro-batch x dp))
// The executor runs the list, the planner simulates it (schedule_sim.h), and
// the tests check it without a model or MPI.
//
// Chunk numbering (agrees with stage_layers() in model/param_layout.h): the
// model is cut into p*v chunks of consecutive layers (equal, or with
// --decoder-first/last-pipeline-num-layers the first and last ranks' chunks
// of another size: ParallelConfig::chunk_first_layer); global chunk g lives on
// rank g % p as its local chunk g / p. So on rank r, local chunk j is global
// chunk j*p + r, and activations flow g -> g+1: rank r's chunk j feeds rank
// r+1's chunk j, and the last rank's chunk j feeds rank 0's chunk j+1.
// zbv places its two chunks per rank in a V instead (config/chunk_placement.h);
// where two consecutive chunks share a rank there is no transfer at all: the
// executor hands the activation (and the gradient back) over in memory, in
// the order the list carries.
//
// Point-to-point semantics (what the executor must do, what the simulator
// models):
//   - Send* is non-blocking (an isend); the sender never waits on it inside
//     the step. The executor completes outstanding sends before ReduceGrads
//     (or earlier, when it needs the buffer back).
//   - Recv* is the WAIT: the point in the list after which the data must be
//     there. The receive itself is posted earlier: the executor posts the
//     irecv of every Recv that sits between compute action i and compute
//     action i+1 when it starts compute action i, so the transfer overlaps
//     that compute. A Recv always comes directly before the Forward/Backward
//     (or BackwardInput) that consumes it, and a Send directly after the
//     compute that produced it; a BackwardWeight has no transfer.
//   - A message is identified by (activation|grad, micro-batch, boundary),
//     boundary = the lower global chunk of the two it connects (g-1 -> g is
//     boundary g-1). The executor derives its MPI tag from that triple
//     (message_boundary()); per neighbour pair the sends and the receives
//     also appear in the same order, so plain FIFO matching would work too.
// ReduceGrads is the data-parallel gradient reduction (and the tied-embedding
// sum between first and last stage); OptimizerStep updates this rank's shard.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/parallel_config.h"

namespace tessera {

enum class ActionType : uint8_t {
  Forward,         // run local chunk `chunk` forward on micro-batch `micro_batch`
  Backward,        // its backward (frees that micro-batch's activations for the chunk)
  SendActivation,  // isend Forward(mb, chunk)'s output to peer_rank
  RecvActivation,  // wait for Forward(mb, chunk)'s input from peer_rank
  SendGrad,        // isend Backward(mb, chunk)'s input-gradient to peer_rank
  RecvGrad,        // wait for Backward(mb, chunk)'s output-gradient from peer_rank
  ReduceGrads,     // data-parallel gradient reduction, once per step
  OptimizerStep,   // once per step, after ReduceGrads
  // The split backward of the zero-bubble schedules (zb-h1): Backward's work
  // in two actions of the same (micro-batch, chunk).
  BackwardInput,   // input gradients only (SendGrad follows at once); stashes each
                   // weight GEMM's output gradient
  BackwardWeight,  // weight (and bias) gradients from that stash; frees the activations
};
const char* action_type_name(ActionType t);

struct Action {
  ActionType type;
  int64_t micro_batch = -1;  // 0..m-1; -1 for ReduceGrads / OptimizerStep
  int64_t chunk = -1;        // LOCAL chunk 0..v-1 on this rank that computes, produced
                             // (Send*) or consumes (Recv*) the data; -1 for the step-level two
  int64_t peer_rank = -1;    // pipeline rank at the other end of a Send/Recv; -1 otherwise
  bool operator==(const Action&) const = default;
};

// "F mb3 c1", "SendAct mb3 c1 -> r2", "ReduceGrads": for logs, traces and test failures.
std::string action_str(const Action& a);

// Where global chunk g lives (ChunkPlacement, global_chunk, chunk_rank,
// chunk_local): config/chunk_placement.h, the one place it is decided for
// the schedules, the simulator, the engine's layout and the planner.

// The boundary a Send/Recv action on `rank` crosses (see the header comment);
// -1 for compute and step-level actions.
int64_t message_boundary(const Action& a, int64_t p, int64_t rank,
                         ChunkPlacement pl = ChunkPlacement::RoundRobin);

// schedule_validate (config/parallel_config.h) checks (kind, p, v, m);
// build_schedule calls it.

// This rank's actions for one step.
//   GPipe:       all forwards, then all backwards (peak m micro-batches in flight).
//   OneFOneB:    PipeDream-flush: min(p - rank - 1, m) warm-up forwards, then one
//                forward / one backward alternating, then the remaining backwards.
//   Interleaved: 1F1B over v chunks per rank, micro-batches in groups of p per
//                chunk; needs m % p == 0. Bubble (p-1)/(v*m) instead of (p-1)/m.
//   ZeroBubbleH1: 1F1B's order with each Backward split into BackwardInput
//                and BackwardWeight (Qi et al. 2024, ZB-H1); rank r runs its
//                W's r micro-batches behind its B's, so the W's fill the
//                cool-down's idle time. With equal F, B, W costs the bubble
//                is a third of 1F1B's; every rank holds at most min(m, p)
//                activations (1F1B's peak, on rank 0).
//                Needs p >= 2, v = 1.
//   ZeroBubbleV: ZBV (Qi et al. 2024, V-shape): the split backward over two
//                chunks per rank in ChunkPlacement::V. The order is built by
//                a greedy list scheduler with unit F, B, W (schedule_zbv.h):
//                B first, then F, W in the idle time, forwards of local
//                chunk 0 capped at min(m, p) micro-batches in flight, so a
//                rank holds at most 2 min(m, p) half-size chunk-activations:
//                1F1B's peak. Needs p >= 2, v = 2; any m >= 1.
std::vector<Action> build_schedule(ScheduleKind kind, int64_t p, int64_t v, int64_t m,
                                   int64_t rank);

// This rank's actions for a forward-only pass (evaluation): for each
// micro-batch in turn, its chunks in order, each with its Recv before and its
// Send after; no Backward, ReduceGrads or OptimizerStep. Any (p, v, m) works
// (no m % p rule): every action waits only on actions of an earlier
// (micro-batch, global chunk), which come earlier in their rank's list, so
// the pass cannot deadlock. One chunk-activation is in flight per rank.
// pl: the placement of the training schedule's chunks (zbv: V, where the
// last rank runs its two chunks of a micro-batch back to back).
std::vector<Action> build_forward_schedule(int64_t p, int64_t v, int64_t m, int64_t rank,
                                           ChunkPlacement pl = ChunkPlacement::RoundRobin);

// All ranks' lists, for the simulator and the tests.
struct PipelineSchedule {
  ScheduleKind kind;
  int64_t p = 1, v = 1, m = 1;
  std::vector<std::vector<Action>> ranks;  // ranks[r] = build_schedule(kind, p, v, m, r)
};
PipelineSchedule build_pipeline(ScheduleKind kind, int64_t p, int64_t v, int64_t m);

// Most chunk-activations held at once by a list (Forward done, its Backward
// or BackwardWeight not yet): what activation memory must hold. Depends only
// on the order, not on costs: 1F1B gives min(m, p - rank), GPipe m, ZB-H1
// min(m, p), ZBV at most 2 min(m, p) (its chunks are half 1F1B's stage).
int64_t peak_in_flight(const std::vector<Action>& actions);

}  // namespace tessera
