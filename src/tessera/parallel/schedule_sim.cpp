#include "tessera/parallel/schedule_sim.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

namespace {

// Dataflow simulation: a rank runs until it reaches a Recv whose message has
// not been sent yet, then parks on that message. Sends never block, so a
// rank's clock depends only on its own costs and on the send times of what
// it receives, and the order in which ranks are run does not change any
// time. Every action is visited once: O(total actions).
//
// The action lists are first compiled into one flat array of 8-byte ops
// (message slot or global chunk resolved, the schedule checked on the way):
// the run hops between ranks every few actions and is bound by memory
// traffic (and, on a fresh process, by page faults), not by arithmetic.
struct Sim {
  struct Op {
    uint32_t arg;  // Send/Recv: index into msgs; Forward/Backward: global chunk
    ActionType type;
  };
  // One slot per message, ordered (micro-batch, boundary, kind): the ranks
  // move through the micro-batches together, so what they touch at any time
  // is a narrow band of slots (a boundary-major order puts the p streams a
  // power of two apart, and they fight over the same cache sets).
  struct Msg {
    double arrival = -1.0;  // < 0: not sent yet
    int32_t waiter = -1;    // rank parked on this message, or -1
    bool received = false;
  };

  const PipelineSchedule& s;
  const ScheduleCosts& c;
  bool record;
  int64_t chunks;                // p * v
  ChunkPlacement placement;      // where each global chunk lives (schedule.h)
  std::vector<double> fwd, bwd;  // cost by global chunk
  std::vector<double> bwd_in, bwd_w;  // a split backward's halves, by global chunk
  std::vector<Op> ops;           // all ranks' compiled lists, back to back
  std::vector<size_t> begin;     // rank r's ops are [begin[r], begin[r+1])
  std::vector<Msg> msgs;
  std::vector<size_t> pc;        // next op of each rank (absolute index)
  std::vector<int64_t> in_flight;
  std::vector<int64_t> ready;    // ranks that can run
  SimResult res;

  Sim(const PipelineSchedule& s_, const ScheduleCosts& c_, bool record_)
      : s(s_), c(c_), record(record_), chunks(s_.p * s_.v),
        placement(chunk_placement(s_.kind)) {
    size_t p = size_t(s.p);
    TESSERA_CHECK(s.ranks.size() == p, "schedule has {} rank lists, want p = {}", s.ranks.size(),
                  s.p);
    TESSERA_CHECK(c.p2p_latency >= 0, "schedule costs: p2p_latency must be >= 0");
    TESSERA_CHECK(c.weight_share >= 0 && c.weight_share <= 1,
                  "schedule costs: weight_share must be in [0, 1] (got {})", c.weight_share);
    TESSERA_CHECK(2 * s.m * chunks < int64_t(UINT32_MAX), "schedule too large to simulate");
    msgs.assign(size_t(2 * s.m * chunks), Msg{});
    compile();
    pc.assign(begin.begin(), begin.end() - 1);
    in_flight.assign(p, 0);
    res.busy.assign(p, 0.0);
    res.finish.assign(p, 0.0);
    res.peak_in_flight.assign(p, 0);
    if (record) {
      res.timeline.resize(p);
      for (size_t r = 0; r < p; ++r) res.timeline[r].reserve(s.ranks[r].size());
    }
  }

  void compile() {
    auto per_chunk = [&](const std::vector<double>& by, double uniform, const char* what) {
      TESSERA_CHECK(by.empty() || int64_t(by.size()) == chunks,
                    "schedule costs: {}_by_chunk has {} entries, want p*v = {}", what, by.size(),
                    chunks);
      return by.empty() ? std::vector<double>(size_t(chunks), uniform) : by;
    };
    fwd = per_chunk(c.forward_by_chunk, c.forward, "forward");
    bwd = per_chunk(c.backward_by_chunk, c.backward, "backward");
    TESSERA_CHECK(c.weight_by_chunk.empty() || int64_t(c.weight_by_chunk.size()) == chunks,
                  "schedule costs: weight_by_chunk has {} entries, want p*v = {}",
                  c.weight_by_chunk.size(), chunks);
    for (size_t g = 0; g < bwd.size(); ++g) {
      const double w = c.weight_by_chunk.empty() ? bwd[g] * c.weight_share : c.weight_by_chunk[g];
      TESSERA_CHECK(w >= 0 && w <= bwd[g] * (1 + 1e-12),
                    "schedule costs: chunk {}'s weight pass {} is not within its backward {}", g,
                    w, bwd[g]);
      bwd_w.push_back(std::min(w, bwd[g]));
      bwd_in.push_back(bwd[g] - bwd_w.back());
    }
    size_t total = 0;
    for (const auto& list : s.ranks) total += list.size();
    ops.reserve(total);
    begin.push_back(0);
    for (int64_t r = 0; r < s.p; ++r) {
      for (const Action& a : s.ranks[size_t(r)]) {
        bool step_level = a.type == ActionType::ReduceGrads || a.type == ActionType::OptimizerStep;
        TESSERA_CHECK(step_level || (a.micro_batch >= 0 && a.micro_batch < s.m && a.chunk >= 0 &&
                                     a.chunk < s.v),
                      "malformed schedule: rank {} action '{}' names no (micro-batch, chunk) of "
                      "m = {}, v = {}",
                      r, action_str(a), s.m, s.v);
        bool compute = a.type == ActionType::Forward || a.type == ActionType::Backward ||
                       a.type == ActionType::BackwardInput || a.type == ActionType::BackwardWeight;
        uint32_t arg = step_level ? 0
                       : compute  ? uint32_t(global_chunk(s.p, r, a.chunk, placement))
                                  : slot(a, r);
        ops.push_back({arg, a.type});
      }
      begin.push_back(ops.size());
    }
  }

  // The message slot of a Send/Recv, after checking the action names the
  // neighbour its chunk boundary implies.
  uint32_t slot(const Action& a, int64_t rank) const {
    int64_t b = message_boundary(a, s.p, rank, placement);
    int64_t other =
        global_chunk(s.p, rank, a.chunk, placement) == b ? b + 1 : b;  // chunk at the other end
    TESSERA_CHECK(b >= 0 && b < chunks - 1 && a.peer_rank == chunk_rank(s.p, other, placement),
                  "malformed schedule: rank {} action '{}' does not cross a chunk boundary to "
                  "its neighbour",
                  rank, action_str(a));
    bool grad = a.type == ActionType::SendGrad || a.type == ActionType::RecvGrad;
    return uint32_t((a.micro_batch * chunks + b) * 2 + int64_t(grad));
  }

  const Action& action_at(int64_t r, size_t i) const {
    return s.ranks[size_t(r)][i - begin[size_t(r)]];
  }

  // Runs rank r until it finishes or parks on a message not yet sent.
  void run(int64_t r) {
    const size_t R = size_t(r), end = begin[R + 1];
    double t = res.finish[R], busy = res.busy[R], pipe = res.pipeline_time;
    int64_t n = in_flight[R], peak = res.peak_in_flight[R];
    std::vector<SimSpan>* spans = record ? &res.timeline[R] : nullptr;
    size_t i = pc[R];
    auto save = [&] {  // the loop keeps its state in locals; write it back
      pc[R] = i;
      res.finish[R] = t;
      res.busy[R] = busy;
      res.pipeline_time = pipe;
      in_flight[R] = n;
      res.peak_in_flight[R] = peak;
    };
    for (; i < end; ++i) {
      const Op& op = ops[i];
      double start = t;
      switch (op.type) {
        case ActionType::Forward:
          peak = std::max(peak, ++n);
          t += fwd[op.arg];
          busy += fwd[op.arg];
          pipe = std::max(pipe, t);
          break;
        case ActionType::Backward:
          --n;
          t += bwd[op.arg];
          busy += bwd[op.arg];
          pipe = std::max(pipe, t);
          break;
        case ActionType::BackwardInput:
          t += bwd_in[op.arg];
          busy += bwd_in[op.arg];
          pipe = std::max(pipe, t);
          break;
        case ActionType::BackwardWeight:  // the last pass over the activations
          --n;
          t += bwd_w[op.arg];
          busy += bwd_w[op.arg];
          pipe = std::max(pipe, t);
          break;
        case ActionType::SendActivation:
        case ActionType::SendGrad: {
          Msg& msg = msgs[op.arg];
          TESSERA_CHECK(msg.arrival < 0, "malformed schedule: rank {} sends '{}' twice", r,
                        action_str(action_at(r, i)));
          msg.arrival = t + c.p2p_latency;
          if (msg.waiter >= 0) ready.push_back(msg.waiter);
          msg.waiter = -1;
          pipe = std::max(pipe, t);
          break;
        }
        case ActionType::RecvActivation:
        case ActionType::RecvGrad: {
          Msg& msg = msgs[op.arg];
          if (msg.arrival < 0) {  // not sent yet: park here, the send will wake us
            msg.waiter = int32_t(r);
            save();
            return;
          }
          TESSERA_CHECK(!msg.received, "malformed schedule: rank {} receives '{}' twice", r,
                        action_str(action_at(r, i)));
          msg.received = true;
          t = std::max(t, msg.arrival);
          pipe = std::max(pipe, t);
          break;
        }
        case ActionType::ReduceGrads: t += c.reduce_grads; break;
        case ActionType::OptimizerStep: t += c.optimizer_step; break;
      }
      if (spans) spans->push_back({start, t});
    }
    save();
  }

  void report_deadlock() {
    res.deadlock = true;
    int64_t stuck = 0;
    for (int64_t r = 0; r < s.p; ++r) {
      size_t i = pc[size_t(r)];
      if (i >= begin[size_t(r) + 1]) continue;
      if (stuck++ < 8)
        res.deadlock_report +=
            fmt::format("rank {} waits at action {} '{}' (never sent)\n", r,
                        i - begin[size_t(r)], action_str(action_at(r, i)));
    }
    if (stuck > 8) res.deadlock_report += fmt::format("... and {} more ranks\n", stuck - 8);
    res.deadlock_report = fmt::format("deadlock: {} of {} ranks cannot progress\n", stuck, s.p) +
                          res.deadlock_report;
  }

  SimResult go() {
    for (int64_t r = s.p - 1; r >= 0; --r) ready.push_back(r);
    while (!ready.empty()) {
      int64_t r = ready.back();
      ready.pop_back();
      run(r);
    }
    bool done = true;
    for (int64_t r = 0; r < s.p; ++r) done &= pc[size_t(r)] == begin[size_t(r) + 1];
    if (!done) {
      report_deadlock();
    } else {
      for (size_t k = 0; k < msgs.size(); ++k) {
        size_t mb = k / size_t(2 * chunks), b = (k / 2) % size_t(chunks), grad = k % 2;
        TESSERA_CHECK(msgs[k].arrival < 0 || msgs[k].received,
                      "malformed schedule: {} of micro-batch {} across chunk boundary {} -> {} is "
                      "sent but never received",
                      grad ? "gradient" : "activation", mb, b, b + 1);
      }
    }
    double busy = 0;
    for (int64_t r = 0; r < s.p; ++r) {
      busy += res.busy[size_t(r)];
      res.makespan = std::max(res.makespan, res.finish[size_t(r)]);
    }
    if (busy > 0) res.bubble_fraction = (double(s.p) * res.pipeline_time - busy) / busy;
    return std::move(res);
  }
};

}  // namespace

SimResult simulate_schedule(const PipelineSchedule& s, const ScheduleCosts& costs,
                            bool record_timeline) {
  Sim sim(s, costs, record_timeline);
  return sim.go();
}

}  // namespace tessera
