#include "tessera/parallel/schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/parallel/schedule_zbv.h"

namespace tessera {

const char* action_type_name(ActionType t) {
  switch (t) {
    case ActionType::Forward: return "F";
    case ActionType::Backward: return "B";
    case ActionType::SendActivation: return "SendAct";
    case ActionType::RecvActivation: return "RecvAct";
    case ActionType::SendGrad: return "SendGrad";
    case ActionType::RecvGrad: return "RecvGrad";
    case ActionType::ReduceGrads: return "ReduceGrads";
    case ActionType::OptimizerStep: return "OptimizerStep";
    case ActionType::BackwardInput: return "BI";
    case ActionType::BackwardWeight: return "W";
  }
  return "?";
}

std::string action_str(const Action& a) {
  switch (a.type) {
    case ActionType::Forward:
    case ActionType::Backward:
    case ActionType::BackwardInput:
    case ActionType::BackwardWeight:
      return fmt::format("{} mb{} c{}", action_type_name(a.type), a.micro_batch, a.chunk);
    case ActionType::SendActivation:
    case ActionType::SendGrad:
      return fmt::format("{} mb{} c{} -> r{}", action_type_name(a.type), a.micro_batch, a.chunk,
                         a.peer_rank);
    case ActionType::RecvActivation:
    case ActionType::RecvGrad:
      return fmt::format("{} mb{} c{} <- r{}", action_type_name(a.type), a.micro_batch, a.chunk,
                         a.peer_rank);
    default: return action_type_name(a.type);
  }
}

int64_t message_boundary(const Action& a, int64_t p, int64_t rank, ChunkPlacement pl) {
  int64_t g = global_chunk(p, rank, a.chunk, pl);
  switch (a.type) {
    case ActionType::SendActivation: return g;      // g -> g+1
    case ActionType::RecvActivation: return g - 1;  // g-1 -> g
    case ActionType::SendGrad: return g - 1;        // g -> g-1
    case ActionType::RecvGrad: return g;            // g+1 -> g
    default: return -1;
  }
}

namespace {

// Appends one compute action with the transfers around it: the Recv (wait)
// right before, the Send right after. The first global chunk takes its input
// from the embedding and the last one its gradient from the loss, so those
// two ends have no transfer; nor has a boundary between two chunks of the
// same rank (zbv's V turns on the last rank): the list's order carries it.
// The peers follow the placement: under RoundRobin the previous chunk is on
// rank - 1 and the next on rank + 1 (mod p), as before.
struct Emitter {
  int64_t p, v, rank;
  std::vector<Action>& out;
  ChunkPlacement pl = ChunkPlacement::RoundRobin;

  int64_t g(int64_t j) const { return global_chunk(p, rank, j, pl); }
  bool first(int64_t j) const { return g(j) == 0; }
  bool last(int64_t j) const { return g(j) == p * v - 1; }
  int64_t prev(int64_t j) const { return chunk_rank(p, g(j) - 1, pl); }  // !first(j)
  int64_t next(int64_t j) const { return chunk_rank(p, g(j) + 1, pl); }  // !last(j)
  // Only the V hands off on one rank; RoundRobin keeps its lists as they
  // were (the forward-only pass at p = 1, v > 1 sends to itself).
  bool same_rank(int64_t peer) const { return pl == ChunkPlacement::V && peer == rank; }
  bool recv_prev(int64_t j) const { return !first(j) && !same_rank(prev(j)); }
  bool send_next(int64_t j) const { return !last(j) && !same_rank(next(j)); }

  void forward(int64_t mb, int64_t j) {
    if (recv_prev(j)) out.push_back({ActionType::RecvActivation, mb, j, prev(j)});
    out.push_back({ActionType::Forward, mb, j, -1});
    if (send_next(j)) out.push_back({ActionType::SendActivation, mb, j, next(j)});
  }
  // Backward, or the input half of a split one (BackwardInput): the same transfers.
  void backward(int64_t mb, int64_t j, ActionType type = ActionType::Backward) {
    if (send_next(j)) out.push_back({ActionType::RecvGrad, mb, j, next(j)});
    out.push_back({type, mb, j, -1});
    if (recv_prev(j)) out.push_back({ActionType::SendGrad, mb, j, prev(j)});
  }
  void backward_weight(int64_t mb, int64_t j) {
    out.push_back({ActionType::BackwardWeight, mb, j, -1});
  }
  void finish() {
    out.push_back({ActionType::ReduceGrads, -1, -1, -1});
    out.push_back({ActionType::OptimizerStep, -1, -1, -1});
  }
};

void build_gpipe(Emitter& e, int64_t m) {
  for (int64_t mb = 0; mb < m; ++mb) e.forward(mb, 0);
  for (int64_t mb = 0; mb < m; ++mb) e.backward(mb, 0);
}

// PipeDream-flush. Rank r runs p - r - 1 forwards ahead: that is how many
// micro-batches are still travelling down to the last stage and back when
// the gradient of micro-batch 0 reaches it. After that each forward is
// paired with one backward, so at most p - r activations are alive.
void build_1f1b(Emitter& e, int64_t p, int64_t m, int64_t rank) {
  int64_t warmup = std::min(p - rank - 1, m);
  for (int64_t mb = 0; mb < warmup; ++mb) e.forward(mb, 0);
  for (int64_t i = 0; i < m - warmup; ++i) {
    e.forward(warmup + i, 0);
    e.backward(i, 0);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) e.backward(mb, 0);
}

// ZB-H1 (Qi et al. 2024, arXiv:2401.10241, section 3.1). 1F1B's order of
// forwards and input backwards, so the input gradient races up the pipeline
// as fast as in 1F1B with B alone on the critical path; each rank then runs
// its weight passes `rank` micro-batches behind its input passes. Why that
// lag: in 1F1B's cool-down rank r waits for p - r - 1 gradients, one B + W
// apart; here they come one B apart, and the r deferred W's fill the gaps
// between them (rank r's B's of the cool-down wait on rank p-1's, which has
// the most, p - 1, W's to spend). With unit F, B, W every rank idles p - 1
// units instead of 1F1B's 3 (p - 1): a third of the bubble. The lag adds r
// to rank r's activations held (until W), p - r - 1 + 1 + r = p at most:
// rank 0's 1F1B peak on every rank.
void build_zbh1(Emitter& e, int64_t p, int64_t m, int64_t rank) {
  const int64_t warmup = std::min(p - rank - 1, m);
  int64_t next_w = 0;  // the oldest micro-batch whose W has not run
  auto input_backward = [&](int64_t mb) {
    e.backward(mb, 0, ActionType::BackwardInput);
    if (mb >= rank) e.backward_weight(next_w++, 0);  // `rank` W's behind
  };
  for (int64_t mb = 0; mb < warmup; ++mb) e.forward(mb, 0);
  for (int64_t i = 0; i < m - warmup; ++i) {
    e.forward(warmup + i, 0);
    input_backward(i);
  }
  for (int64_t mb = m - warmup; mb < m; ++mb) input_backward(mb);
  while (next_w < m) e.backward_weight(next_w++, 0);  // the deferred ones
}

// Interleaved 1F1B. Every rank walks the same sequence of m*v forward
// "steps": micro-batches in groups of p, each group run through chunk 0,
// then chunk 1, ..., then chunk v-1 before the next group starts. Backward
// steps walk the same sequence with the chunks reversed (v-1 first). Groups
// of p are what make it flow: by the time rank 0 finishes chunk 0 for the p
// micro-batches of a group, the first of them has come round from rank p-1
// and is ready for chunk 1.
struct Step {
  int64_t mb, chunk;
};
Step interleaved_step(int64_t k, int64_t p, int64_t v, bool backward) {
  int64_t group = k / (p * v), in_group = k % (p * v);
  int64_t j = in_group / p;
  return {group * p + in_group % p, backward ? v - 1 - j : j};
}

// Warm-up: the first backward anywhere is B(mb 0, last global chunk) on rank
// p-1, right after its forward step (v-1)*p; so rank p-1 needs (v-1)*p
// forward steps first. Each hop back towards rank 0 adds one forward and one
// backward of delay before the gradient arrives, hence + 2 per rank.
void build_interleaved(Emitter& e, int64_t p, int64_t v, int64_t m, int64_t rank) {
  int64_t total = m * v;
  int64_t warmup = std::min((v - 1) * p + 2 * (p - rank - 1), total);
  auto fwd = [&](int64_t k) {
    Step s = interleaved_step(k, p, v, false);
    e.forward(s.mb, s.chunk);
  };
  auto bwd = [&](int64_t k) {
    Step s = interleaved_step(k, p, v, true);
    e.backward(s.mb, s.chunk);
  };
  for (int64_t k = 0; k < warmup; ++k) fwd(k);
  for (int64_t i = 0; i < total - warmup; ++i) {
    fwd(warmup + i);
    bwd(i);
  }
  for (int64_t k = total - warmup; k < total; ++k) bwd(k);
}

// ZBV: the greedy order (schedule_zbv.h) with its transfers added.
void emit_zbv(Emitter& e, const std::vector<Action>& order) {
  for (const Action& a : order) {
    if (a.type == ActionType::Forward) e.forward(a.micro_batch, a.chunk);
    if (a.type == ActionType::BackwardInput)
      e.backward(a.micro_batch, a.chunk, ActionType::BackwardInput);
    if (a.type == ActionType::BackwardWeight) e.backward_weight(a.micro_batch, a.chunk);
  }
}

std::vector<Action> zbv_schedule(const std::vector<Action>& order, int64_t p, int64_t m,
                                 int64_t rank) {
  std::vector<Action> out;
  out.reserve(size_t(14 * m + 2));
  Emitter e{p, 2, rank, out, ChunkPlacement::V};
  emit_zbv(e, order);
  e.finish();
  return out;
}

}  // namespace

std::vector<Action> build_schedule(ScheduleKind kind, int64_t p, int64_t v, int64_t m,
                                   int64_t rank) {
  schedule_validate(kind, p, v, m);
  TESSERA_CHECK(rank >= 0 && rank < p, "pipeline rank {} out of range [0, {})", rank, p);
  if (kind == ScheduleKind::ZeroBubbleV)
    return zbv_schedule(zbv_compute_order(p, m)[size_t(rank)], p, m, rank);
  std::vector<Action> out;
  out.reserve(size_t(7 * m * v + 2));  // per (mb, chunk): recv, F, send, recv, B, send (, W)
  Emitter e{p, v, rank, out};
  switch (kind) {
    case ScheduleKind::GPipe: build_gpipe(e, m); break;
    case ScheduleKind::OneFOneB: build_1f1b(e, p, m, rank); break;
    case ScheduleKind::Interleaved: build_interleaved(e, p, v, m, rank); break;
    case ScheduleKind::ZeroBubbleH1: build_zbh1(e, p, m, rank); break;
    case ScheduleKind::ZeroBubbleV: break;  // above
  }
  e.finish();
  return out;
}

std::vector<Action> build_forward_schedule(int64_t p, int64_t v, int64_t m, int64_t rank,
                                           ChunkPlacement pl) {
  TESSERA_CHECK(p >= 1 && v >= 1 && m >= 1, "forward schedule: p, v, m must be >= 1 (got {}, {}, {})",
                p, v, m);
  TESSERA_CHECK(rank >= 0 && rank < p, "pipeline rank {} out of range [0, {})", rank, p);
  std::vector<Action> out;
  TESSERA_CHECK(pl == ChunkPlacement::RoundRobin || v == 2,
                "forward schedule: the V placement has two chunks per rank (got {})", v);
  out.reserve(size_t(3 * m * v));  // per (mb, chunk): recv, F, send
  // Local chunks in order are global chunks in ascending order in either
  // placement, so the list runs (micro-batch, global chunk) ascending.
  Emitter e{p, v, rank, out, pl};
  for (int64_t mb = 0; mb < m; ++mb)
    for (int64_t j = 0; j < v; ++j) e.forward(mb, j);
  return out;
}

PipelineSchedule build_pipeline(ScheduleKind kind, int64_t p, int64_t v, int64_t m) {
  schedule_validate(kind, p, v, m);
  PipelineSchedule s{kind, p, v, m, {}};
  s.ranks.reserve(size_t(p));
  if (kind == ScheduleKind::ZeroBubbleV) {  // one greedy run gives every rank's order
    const auto orders = zbv_compute_order(p, m);
    for (int64_t r = 0; r < p; ++r) s.ranks.push_back(zbv_schedule(orders[size_t(r)], p, m, r));
    return s;
  }
  for (int64_t r = 0; r < p; ++r) s.ranks.push_back(build_schedule(kind, p, v, m, r));
  return s;
}

int64_t peak_in_flight(const std::vector<Action>& actions) {
  int64_t now = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.type == ActionType::Forward) peak = std::max(peak, ++now);
    // The activations live until the last pass that reads them.
    if (a.type == ActionType::Backward || a.type == ActionType::BackwardWeight) --now;
  }
  return peak;
}

}  // namespace tessera
