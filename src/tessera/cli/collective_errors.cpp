#include "tessera/cli/collective_errors.h"

#include <fmt/core.h>

#include <exception>
#include <new>

#include "tessera/comm/mpi_runtime.h"
#include "tessera/core/error.h"

namespace tessera::cli {

namespace {

// The status of a job a failing rank ended: the same as any bad input.
constexpr int kRankErrorExitCode = 2;

// A 24-bit hash: exact in a float, which is what the reductions carry.
float message_hash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return float((h & 0xFFFFFFu) + 1);  // 0 means "no error"
}

}  // namespace

void report_error(const comm::Communicator& world, const Error& e) {
  if (dynamic_cast<const ReportedError*>(&e)) return;
  const bool collective = dynamic_cast<const CollectiveError*>(&e) != nullptr;
  if (world.size() == 1 || (collective && world.rank() == 0))
    fmt::print(stderr, "tessera: error: {}\n", clipped(e.what(), 2000));
  else if (!collective)
    fmt::print(stderr, "tessera: error: [rank {}] {}\n", world.rank(), clipped(e.what(), 2000));
}

void end_job_on_rank_error(const comm::Communicator& world, const std::exception& e) {
  if (world.size() == 1) return;
  const std::string line =
      dynamic_cast<const ReportedError*>(&e)
          ? std::string()  // already printed
          : fmt::format("tessera: error: [rank {}] {}", world.rank(), e.what());
  comm::MpiRuntime::abort(line, kRankErrorExitCode);
}

void agree(comm::Communicator& world, const std::function<void()>& work) {
  std::string message;
  try {
    work();
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::bad_alloc&) {
    message = "out of memory";
  } catch (const std::exception& e) {
    // Any other exception is an error like a tessera::Error: agreed on,
    // never left to end one rank while the others wait in a collective.
    message = e.what();
  }
  if (world.size() == 1) {
    if (!message.empty()) throw Error(message);
    return;
  }
  const float mine = message.empty() ? 0.0f : message_hash(message);
  const float any = world.all_reduce_scalar(mine, comm::ReduceOp::Max);
  if (any == 0.0f) return;
  float rank0 = world.rank() == 0 ? mine : 0.0f;
  rank0 = world.all_reduce_scalar(rank0, comm::ReduceOp::Max);  // rank 0's outcome, everywhere
  if (!message.empty()) {
    if (world.rank() == 0)
      fmt::print(stderr, "tessera: error: {}\n", message);
    else if (mine != rank0)  // rank 0 did not say it: this rank must
      fmt::print(stderr, "tessera: error: [rank {}] {}\n", world.rank(), message);
  }
  throw ReportedError();
}

}  // namespace tessera::cli
