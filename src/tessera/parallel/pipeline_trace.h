// Pipeline trace: the executor's per-action timings, gathered from every
// rank and written as a Chrome trace (chrome://tracing, Perfetto): one track
// (pid) per world rank, one "X" event per action, e.g. "F mb3 c0".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/parallel/schedule.h"

namespace tessera {

// One action's interval. Times are microseconds on the steady clock, which
// every process of a node shares, so ranks line up without a sync.
struct TraceSpan {
  Action action{ActionType::Forward};  // named by action_str: "F mb3 c0" (local chunk)
  double start_us = 0.0, end_us = 0.0;
};

// Now on the steady clock, in microseconds (TraceSpan's time base).
double trace_now_us();

// All ranks' spans, indexed by world rank: collective over `world`; the
// result is filled on rank 0 only (empty elsewhere).
std::vector<std::vector<TraceSpan>> gather_spans(comm::Communicator& world,
                                                 const std::vector<TraceSpan>& mine);

// Writes traceEvents (ph "X", pid = world rank, tid 0, ts/dur in µs from the
// earliest span). Each track is named "rank R", followed by track_notes[R]
// when given (e.g. "pp 1: layers 1-3"). Throws tessera::Error if the file
// cannot be written.
void write_chrome_trace(const std::string& path,
                        const std::vector<std::vector<TraceSpan>>& per_rank,
                        const std::vector<std::string>& track_notes = {});

}  // namespace tessera
