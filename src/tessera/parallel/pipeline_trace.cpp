#include "tessera/parallel/pipeline_trace.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <nlohmann/json.hpp>

#include "tessera/core/error.h"
#include "tessera/core/output_file.h"

namespace tessera {

namespace {

// The fixed-size form a span travels in: the gather moves raw bytes.
struct Record {
  double start_us, end_us;
  int32_t type, micro_batch, chunk, peer;
};
static_assert(sizeof(Record) % 2 == 0);

}  // namespace

double trace_now_us() {
  using namespace std::chrono;
  return double(duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count()) /
         1e3;
}

std::vector<std::vector<TraceSpan>> gather_spans(comm::Communicator& world,
                                                 const std::vector<TraceSpan>& mine) {
  const int n = world.size();
  // Counts first (exact in f32 far beyond any schedule's length), then every
  // rank's records padded to the longest list.
  std::vector<float> counts(size_t(n), 0.0f);
  const float my_count = float(mine.size());
  world.all_gather(&my_count, counts.data(), 1, Precision::Fp32);
  const size_t most = size_t(*std::max_element(counts.begin(), counts.end()));
  std::vector<Record> send(std::max<size_t>(most, 1)), recv(send.size() * size_t(n));
  for (size_t i = 0; i < mine.size(); ++i) {
    const Action& a = mine[i].action;
    send[i] = {mine[i].start_us, mine[i].end_us, int32_t(a.type), int32_t(a.micro_batch),
               int32_t(a.chunk), int32_t(a.peer_rank)};
  }
  // F16 only as a 2-byte unit: data movement takes any dtype.
  world.all_gather(send.data(), recv.data(), send.size() * sizeof(Record) / 2, Precision::Fp16);
  std::vector<std::vector<TraceSpan>> out;
  if (world.rank() != 0) return out;
  out.resize(size_t(n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < size_t(counts[size_t(r)]); ++i) {
      const Record& x = recv[size_t(r) * send.size() + i];
      TraceSpan s;
      s.action = {ActionType(x.type), x.micro_batch, x.chunk, x.peer};
      s.start_us = x.start_us;
      s.end_us = x.end_us;
      out[size_t(r)].push_back(s);
    }
  return out;
}

void write_chrome_trace(const std::string& path,
                        const std::vector<std::vector<TraceSpan>>& per_rank,
                        const std::vector<std::string>& track_notes) {
  double t0 = std::numeric_limits<double>::infinity();
  for (const auto& spans : per_rank)
    for (const TraceSpan& s : spans) t0 = std::min(t0, s.start_us);
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < per_rank.size(); ++r) {
    // Name the track, so the viewer shows "rank 3" instead of a bare pid.
    std::string name = "rank " + std::to_string(r);
    if (r < track_notes.size() && !track_notes[r].empty()) name += " (" + track_notes[r] + ")";
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0},
                      {"args", {{"name", name}}}});
    for (const TraceSpan& s : per_rank[r])
      events.push_back({{"ph", "X"},
                        {"name", action_str(s.action)},
                        {"cat", action_type_name(s.action.type)},
                        {"pid", r},
                        {"tid", 0},
                        {"ts", s.start_us - t0},
                        {"dur", s.end_us - s.start_us}});
  }
  write_output_file(path,
                    nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() + "\n",
                    "--trace");
}

}  // namespace tessera
