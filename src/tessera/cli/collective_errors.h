// Errors in a multi-rank job: one clear message, and every rank exits.
//
// Setup (flags, files, layout) runs on every rank; agree() makes the ranks
// compare outcomes before anything collective follows, so a rank that failed
// never leaves the others waiting in a collective. The message is printed
// once by rank 0 when every rank failed alike, and by each failing rank
// (with its rank) otherwise.
#pragma once
#include <functional>

#include "tessera/comm/communicator.h"
#include "tessera/core/error.h"

namespace tessera::cli {

// Runs `work`; if it throws (a tessera::Error or any std::exception) on any
// rank, prints as above and
// throws ReportedError on every rank.
void agree(comm::Communicator& world, const std::function<void()>& work);

// Prints an error raised during training: CollectiveError by rank 0 only,
// any other by the rank that raised it (with its rank when world > 1).
void report_error(const comm::Communicator& world, const Error& e);

// An error (any exception) that this rank raised alone during training, in a
// world of more than one: prints its one line ("[rank N]") and ends every
// rank of the job with exit status 2 (MPI_Abort), since the other ranks wait
// in a collective this one will never join. In a world of one it returns,
// and the caller rethrows to main(), which reports it.
void end_job_on_rank_error(const comm::Communicator& world, const std::exception& e);

}  // namespace tessera::cli
