// Network measurement for `tessera calibrate`: a ping-pong between ranks 0
// and 1 through the engine's Communicator (the path training traffic takes),
// giving the alpha (latency) and beta (1 / bandwidth) of the planner's
// alpha-beta collective model.
#include <algorithm>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/core/buffer.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/plan/calibrate.h"
#include "tessera/plan/comm_model.h"

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

// A fixed piece of compute, the engine's own GEMM: 512 x 512 x 512 (0.27 GFLOP).
class GemmWork {
 public:
  GemmWork() : a_(n_ * n_), w_(n_ * n_), c_(n_ * n_) {
    for (int64_t i = 0; i < n_ * n_; ++i) a_.f32()[i] = w_.f32()[i] = float(i % 7) * 0.01f;
  }
  void run(int times) {
    for (int i = 0; i < times; ++i)
      kernels::cpu_backend().matmul_forward(c_.f32(), a_.f32(), w_.f32(), nullptr, n_, n_, n_);
  }

 private:
  static constexpr int64_t n_ = 512;
  Buffer a_, w_, c_;  // (512, 512) each
};

// The mean over the group's ranks.
double group_mean(comm::Communicator& comm, double x) {
  float v = float(x);
  comm.all_reduce(std::span<float>(&v, 1), comm::ReduceOp::Sum);
  return double(v) / comm.size();
}

}  // namespace

double measure_comm_overlap(comm::Communicator& comm) {
  std::vector<float> buf(size_t(4) << 20, 1.0f);  // 16 MiB, a data-parallel bucket's size
  std::span<float> data(buf.data(), buf.size());
  GemmWork work;
  work.run(2);  // warm-up
  auto time = [&](auto&& body) {
    comm.barrier();
    Stopwatch sw;
    body();
    return sw.elapsed();
  };
  const double comm_first = time([&] { comm.all_reduce_async(data).wait(); });
  const double one_gemm = time([&] { work.run(1); });
  // About twice the collective's time of compute, so all of it could hide.
  const int gemms = std::max(1, int(2.0 * comm_first / one_gemm + 0.5));
  // The three configurations interleaved, 15 times each, medians: the
  // machine's drift then touches all three alike.
  std::vector<double> comm_alone, compute_alone, both;
  for (int rep = 0; rep < 15; ++rep) {
    comm_alone.push_back(time([&] { comm.all_reduce_async(data).wait(); }));
    compute_alone.push_back(time([&] { work.run(gemms); }));
    both.push_back(time([&] {
      comm::Work w = comm.all_reduce_async(data);
      work.run(gemms);
      w.wait();
    }));
  }
  const double c = upper_median(comm_alone);
  const double hidden = (upper_median(compute_alone) + c - upper_median(both)) / c;
  return std::clamp(group_mean(comm, hidden), -1.0, 1.0);
}

// The engine's three data-parallel collectives on a 16 MiB gradient-sized
// buffer, each timed 9 times after a barrier (the wait for a late rank is
// not the collective's; the planner prices it apart, as sync_wait), the
// slowest rank's time, medians; over what the ring model gives on a tier
// of the measured latency and bandwidth. On this kind of machine an MPI
// all-reduce also sums on the cores and moves the whole buffer each way
// for 2 ranks, which a ping-pong does not show.
std::array<double, 3> collective_factors(comm::Communicator& comm, const NetworkMeasure& m) {
  const size_t n = size_t(comm.size());
  const size_t shard = (size_t(4) << 20) / n;  // floats per rank's part
  std::vector<float> full(shard * n, 1.0f), part(shard, 1.0f);  // (n * shard), (shard)
  auto median_time = [&](auto&& body) {
    body();  // warm-up
    std::vector<double> t;
    for (int rep = 0; rep < 9; ++rep) {
      comm.barrier();
      Stopwatch sw;
      body();
      float mine = float(sw.elapsed());
      comm.all_reduce(std::span<float>(&mine, 1), comm::ReduceOp::Max);
      t.push_back(double(mine));
    }
    return upper_median(t);
  };
  const double measured[3] = {
      median_time([&] { comm.all_reduce(std::span<float>(full)); }),
      median_time([&] { comm.reduce_scatter(std::span<const float>(full), std::span<float>(part)); }),
      median_time([&] { comm.all_gather(std::span<const float>(part), std::span<float>(full)); })};
  const NetworkTier tier{.name = "measured", .ranks = 0, .bandwidth = m.bandwidth, .latency = m.latency};
  const CommOp ops[3] = {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather};
  const double bytes = 4.0 * double(full.size());
  std::array<double, 3> f{};
  for (size_t k = 0; k < 3; ++k) {
    const RingTerms model = ring_terms(ops[k], bytes, double(n), tier);
    f[k] = std::max(measured[k] - model.latency, 1e-9) / std::max(model.bandwidth, 1e-12);
  }
  return f;
}

NetworkMeasure measure_network(comm::Communicator& comm) {
  TESSERA_CHECK(comm.size() >= 2, "calibrate: the network needs at least 2 ranks");
  NetworkMeasure m;
  m.latency = one_way_seconds(comm, 1, 200);  // 4 bytes: alpha alone
  // 64 MiB: far past any eager/rendezvous switch, so alpha is negligible.
  const size_t big = size_t(16) << 20;
  const double t = one_way_seconds(comm, big, 5);
  m.bandwidth = 4.0 * double(big) / std::max(t - m.latency, 1e-9);
  m.collective_factor = collective_factors(comm, m);
  return m;
}

}  // namespace tessera::plan
