// Network measurement for `tessera calibrate`: a ping-pong between ranks 0
// and 1 through the engine's Communicator (the path training traffic takes),
// giving the alpha (latency) and beta (1 / bandwidth) of the planner's
// alpha-beta collective model.
#include <algorithm>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/plan/calibrate.h"

namespace tessera::plan {

namespace {

// Best one-way time of `count` floats over `reps` round trips (rank 0 sends
// first, rank 1 echoes). Ranks >= 2 only take part in the barriers.
double one_way_seconds(comm::Communicator& comm, size_t count, int reps) {
  std::vector<float> buf(std::max<size_t>(count, 1), 1.0f);
  std::span<float> s(buf.data(), count);
  const int r = comm.rank();
  double best = 1e30;
  comm.barrier();
  for (int i = 0; i < reps + 1; ++i) {  // the first round trip warms up the path
    Stopwatch sw;
    if (r == 0) {
      comm.send(s, 1, 7);
      comm.recv(s, 1, 7);
    } else if (r == 1) {
      comm.recv(s, 0, 7);
      comm.send(s, 0, 7);
    }
    if (i > 0) best = std::min(best, sw.elapsed() / 2);
  }
  // Rank 0 timed the round trips; everyone uses its number.
  float mine = r == 0 ? float(best) : 0.0f;
  comm.all_reduce(std::span<float>(&mine, 1), comm::ReduceOp::Max);
  return double(mine);
}

}  // namespace

NetworkMeasure measure_network(comm::Communicator& comm) {
  TESSERA_CHECK(comm.size() >= 2, "calibrate: the network needs at least 2 ranks");
  NetworkMeasure m;
  m.latency = one_way_seconds(comm, 1, 200);  // 4 bytes: alpha alone
  // 64 MiB: far past any eager/rendezvous switch, so alpha is negligible.
  const size_t big = size_t(16) << 20;
  const double t = one_way_seconds(comm, big, 5);
  m.bandwidth = 4.0 * double(big) / std::max(t - m.latency, 1e-9);
  return m;
}

}  // namespace tessera::plan
