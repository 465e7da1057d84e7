// Bus bandwidth of the engine's all_reduce, reduce_scatter, all_gather and
// all_to_all next to the same operation called on MPI directly, in the same run.
//
//   scripts/mpirun.sh -n 2 build/bench/bench_collectives [max_MiB=256]
//
// Bandwidth conventions are nccl-tests' (src/tessera/comm/comm_op.h): S is
// the full buffer (all_reduce) or the full input/output of n shards
// (reduce_scatter / all_gather), or all a rank sends (all_to_all, n equal
// blocks); busbw = S/t * 2(n-1)/n for all_reduce and S/t * (n-1)/n for the
// others. Engine and MPI calls alternate one by one
// and each side reports its median call (see compare()).
// The "rs/ar" column is the time of the engine's reduce_scatter over the
// time of its all_reduce on the same S: below 1 means ZeRO's reduce-scatter
// costs less than the all-reduce it replaces.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/comm/mpi_runtime.h"

namespace {

using namespace tessera::comm;

struct Pair {
  double engine = 0;  // median seconds per call, slowest rank
  double mpi = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times engine and MPI calls one at a time, alternating (so both see the same
// machine), each after a barrier, and takes the median over samples of the
// slowest rank's time: robust to the scheduling hiccups of a shared box.
Pair compare(const std::function<void()>& engine, const std::function<void()>& mpi) {
  engine();  // warm up both (first-touch pages, MPI's internal buffers)
  mpi();
  MPI_Barrier(MPI_COMM_WORLD);
  double probe = MPI_Wtime();
  engine();
  probe = MPI_Wtime() - probe;
  MPI_Allreduce(MPI_IN_PLACE, &probe, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int samples = std::clamp(int(0.25 / std::max(probe, 1e-7)), 5, 300);
  std::vector<double> times(2 * size_t(samples));
  for (int s = 0; s < samples; ++s) {
    for (int k = 0; k < 2; ++k) {
      const bool engine_turn = (s + k) % 2 == 0;
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      (engine_turn ? engine : mpi)();
      times[2 * size_t(s) + (engine_turn ? 0 : 1)] = MPI_Wtime() - start;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, times.data(), int(times.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::vector<double> engine_times, mpi_times;
  for (int s = 0; s < samples; ++s) {
    engine_times.push_back(times[2 * size_t(s)]);
    mpi_times.push_back(times[2 * size_t(s) + 1]);
  }
  return {median(engine_times), median(mpi_times)};
}

std::string size_name(size_t bytes) {
  char text[32];
  if (bytes >= (1u << 20)) std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  else std::snprintf(text, sizeof text, "%zu KiB", bytes >> 10);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime runtime(&argc, &argv);
  const size_t max_bytes = size_t(argc > 1 ? std::atoi(argv[1]) : 256) << 20;
  auto world = runtime.world();
  const int n = world->size();
  const int me = world->rank();
  const double ring = double(n - 1) / n;
  if (me == 0) {
    std::printf("collectives on %d ranks: bus bandwidth GB/s (engine / MPI, ratio)\n", n);
    std::printf("%9s | %25s | %25s %7s | %25s | %25s\n", "size", "all_reduce",
                "reduce_scatter", "rs/ar", "all_gather", "all_to_all");
  }
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    const size_t shard = count / size_t(n);
    std::vector<float> data(count, 1.0f), out(count, 0.0f), shard_out(shard, 0.0f);
    const size_t S = shard * size_t(n) * sizeof(float);

    // Sums of ones grow by n per call; fine for timing, never inf at these counts.
    Pair ar = compare([&] { world->all_reduce(data); },
                      [&] {
                        MPI_Allreduce(MPI_IN_PLACE, data.data(), int(count), MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD);
                      });
    std::fill(data.begin(), data.end(), 1.0f);
    Pair rs = compare(
        [&] { world->reduce_scatter(std::span<const float>(data.data(), shard * n), shard_out); },
        [&] {
          MPI_Reduce_scatter_block(data.data(), shard_out.data(), int(shard), MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        });
    Pair ag = compare(
        [&] { world->all_gather(shard_out, std::span<float>(out.data(), shard * n)); },
        [&] {
          MPI_Allgather(shard_out.data(), int(shard), MPI_FLOAT, out.data(), int(shard),
                        MPI_FLOAT, MPI_COMM_WORLD);
        });
    // all_to_all of n equal blocks, through the alltoallv path every call takes.
    const size_t ranks = static_cast<size_t>(n);
    const std::vector<size_t> blocks(ranks, shard);
    const std::vector<int> mpi_counts(ranks, static_cast<int>(shard));
    std::vector<int> mpi_displs(ranks);
    for (size_t j = 0; j < ranks; ++j) mpi_displs[j] = static_cast<int>(j * shard);
    Pair a2a = compare(
        [&] { world->all_to_all(data.data(), blocks, out.data(), blocks, tessera::Precision::Fp32); },
        [&] {
          MPI_Alltoallv(data.data(), mpi_counts.data(), mpi_displs.data(), MPI_FLOAT, out.data(),
                        mpi_counts.data(), mpi_displs.data(), MPI_FLOAT, MPI_COMM_WORLD);
        });

    const auto bw = [](double bytes, double factor, double seconds) {
      return bytes * factor / seconds / 1e9;
    };
    if (me == 0) {
      std::printf("%9s | %6.2f / %6.2f  x%6.2f | %6.2f / %6.2f  x%6.2f %7.2f | %6.2f / %6.2f  x%6.2f"
                  " | %6.2f / %6.2f  x%6.2f\n",
                  size_name(bytes).c_str(), bw(double(bytes), 2 * ring, ar.engine),
                  bw(double(bytes), 2 * ring, ar.mpi), ar.mpi / ar.engine,
                  bw(double(S), ring, rs.engine), bw(double(S), ring, rs.mpi), rs.mpi / rs.engine,
                  rs.engine / ar.engine, bw(double(S), ring, ag.engine), bw(double(S), ring, ag.mpi),
                  ag.mpi / ag.engine, bw(double(S), ring, a2a.engine), bw(double(S), ring, a2a.mpi),
                  a2a.mpi / a2a.engine);
      std::fflush(stdout);
    }
  }
  return 0;
}
