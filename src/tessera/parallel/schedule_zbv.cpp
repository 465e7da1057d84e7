#include "tessera/parallel/schedule_zbv.h"

#include <algorithm>
#include <deque>
#include <limits>

#include "tessera/core/error.h"

namespace tessera {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// One rank's progress in the greedy run. Forwards and B's of a chunk go in
// micro-batch order; W's in the order of their B's, so each chunk's W's are
// in micro-batch order too (the gradient sums add in 1F1B's order).
struct RankState {
  int64_t f_next[2] = {0, 0};   // next micro-batch to forward, per local chunk
  int64_t b_next[2] = {0, 0};   // next micro-batch for B, per local chunk
  std::deque<Action> w_queue;   // W's whose B has run, oldest first
  int64_t in_flight = 0;        // chunk-activations held (F done, W not yet)
  int64_t done = 0;             // compute actions run (6 m in all)
};

}  // namespace

// The greedy rules, per rank and unit time step, the first that applies:
//   1. B of the older ready micro-batch (local chunk 1 on a tie: it is the
//      earlier link of the gradient's path back through the V);
//   2. F, chunk 1 before chunk 0 (nearer the loss), within memory: at most
//      cap = 2 min(m, p) chunk-activations, chunk 0 only below cap - 1 so a
//      slot stays for the oldest micro-batch's chunk 1 (without it a rank
//      full of chunk-0 activations would wait for a gradient that needs its
//      own chunk 1: deadlock). cap half-size chunks is 1F1B's peak of
//      min(m, p) full stages;
//   3. the oldest W, in time nothing else can use;
//   else idle.
// A compute action started at time t is done at t + 1, and its result is
// visible from t + 1 (zero-latency transfers), on every rank alike.
std::vector<std::vector<Action>> zbv_compute_order(int64_t p, int64_t m) {
  TESSERA_CHECK(p >= 2 && m >= 1, "zbv: needs p >= 2 and m >= 1 (got p {}, m {})", p, m);
  const int64_t chunks = 2 * p;
  const int64_t cap = 2 * std::min(m, p);
  const ChunkPlacement V = ChunkPlacement::V;
  // When each (global chunk, micro-batch)'s F and B are done: (2p * m) each.
  std::vector<int64_t> f_done(size_t(chunks * m), kNever), b_done(size_t(chunks * m), kNever);
  auto at = [&](int64_t g, int64_t mb) { return size_t(g * m + mb); };

  std::vector<RankState> st(static_cast<size_t>(p));
  std::vector<std::vector<Action>> order(static_cast<size_t>(p));  // per rank
  for (auto& o : order) o.reserve(size_t(6 * m));

  auto f_ready = [&](int64_t r, int64_t j, int64_t t) {
    const int64_t mb = st[size_t(r)].f_next[j];
    if (mb >= m) return false;
    const int64_t g = global_chunk(p, r, j, V);
    return g == 0 || f_done[at(g - 1, mb)] <= t;
  };
  auto b_ready = [&](int64_t r, int64_t j, int64_t t) {
    const int64_t mb = st[size_t(r)].b_next[j];
    if (mb >= m) return false;
    const int64_t g = global_chunk(p, r, j, V);
    return f_done[at(g, mb)] <= t && (g == chunks - 1 || b_done[at(g + 1, mb)] <= t);
  };

  int64_t finished = 0;
  const int64_t limit = 12 * m * p + 8 * p;  // far past any greedy run: a stall is a bug
  for (int64_t t = 0; finished < p; ++t) {
    TESSERA_CHECK(t < limit, "zbv scheduler stalled at time {} (p {}, m {})", t, p, m);
    for (int64_t r = 0; r < p; ++r) {
      RankState& s = st[size_t(r)];
      if (s.done == 6 * m) continue;
      Action a{ActionType::Forward, -1, -1, -1};
      // 1. B
      const bool b0 = b_ready(r, 0, t), b1 = b_ready(r, 1, t);
      if (b0 || b1) {
        const int64_t j = (b1 && (!b0 || s.b_next[1] <= s.b_next[0])) ? 1 : 0;
        a = {ActionType::BackwardInput, s.b_next[j]++, j, -1};
        b_done[at(global_chunk(p, r, j, V), a.micro_batch)] = t + 1;
        s.w_queue.push_back({ActionType::BackwardWeight, a.micro_batch, j, -1});
      } else if (s.in_flight < cap && f_ready(r, 1, t)) {  // 2. F
        a = {ActionType::Forward, s.f_next[1]++, 1, -1};
      } else if (s.in_flight < cap - 1 && f_ready(r, 0, t)) {
        a = {ActionType::Forward, s.f_next[0]++, 0, -1};
      } else if (!s.w_queue.empty()) {  // 3. W
        a = s.w_queue.front();
        s.w_queue.pop_front();
        --s.in_flight;
      } else {
        continue;  // idle: waiting on another rank
      }
      if (a.type == ActionType::Forward) {
        ++s.in_flight;
        f_done[at(global_chunk(p, r, a.chunk, V), a.micro_batch)] = t + 1;
      }
      order[size_t(r)].push_back(a);
      if (++s.done == 6 * m) ++finished;
    }
  }
  return order;
}

}  // namespace tessera
