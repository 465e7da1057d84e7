#include "tessera/comm/collective_log.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessera::comm {

uint64_t CommCounters::total_bytes() const {
  uint64_t total = 0;
  for (const auto& c : by_op) total += c.bytes;
  return total;
}

double CommCounters::total_wire_bytes() const {
  double total = 0;
  for (const auto& c : by_op) total += c.wire_bytes;
  return total;
}

CollectiveLog::CollectiveLog(size_t capacity, int world_rank)
    : ring_(std::max<size_t>(capacity, 1)), world_rank_(world_rank) {}

uint64_t CollectiveLog::begin(CollectiveRecord record) {
  std::lock_guard lock(mutex_);
  record.id = next_id_++;
  ring_[record.id % ring_.size()] = std::move(record);
  return next_id_ - 1;
}

void CollectiveLog::mark_started(uint64_t id, double when) {
  std::lock_guard lock(mutex_);
  auto& r = ring_[id % ring_.size()];
  if (r.id == id) r.start = when;
}

void CollectiveLog::finish(uint64_t id, double when) {
  std::lock_guard lock(mutex_);
  auto& r = ring_[id % ring_.size()];
  // The record may have been overwritten by newer ones while this call was
  // in flight (more than `capacity` calls issued since): count it anyway.
  if (r.id != id) return;
  if (r.start == 0) r.start = r.issued;
  r.end = when;
  const double seconds = r.end - r.start;
  const double wire = double(r.bytes) * bus_factor(r.op, r.group_size);
  for (OpCounters* c : {&counters_.by_op[size_t(r.op)], &counters_.by_group[r.group][size_t(r.op)]}) {
    c->calls += 1;
    c->bytes += r.bytes;
    c->wire_bytes += wire;
    c->seconds += seconds;
  }
}

uint64_t CollectiveLog::recorded() const {
  std::lock_guard lock(mutex_);
  return next_id_;
}

std::vector<CollectiveRecord> CollectiveLog::last(size_t count) const {
  std::lock_guard lock(mutex_);
  count = std::min({count, size_t(next_id_), ring_.size()});
  std::vector<CollectiveRecord> out;
  out.reserve(count);
  for (uint64_t id = next_id_ - count; id < next_id_; ++id) out.push_back(ring_[id % ring_.size()]);
  return out;
}

std::vector<CollectiveRecord> CollectiveLog::overdue(double now, double timeout) const {
  std::lock_guard lock(mutex_);
  std::vector<CollectiveRecord> out;
  const uint64_t n = std::min<uint64_t>(next_id_, ring_.size());
  for (uint64_t id = next_id_ - n; id < next_id_; ++id) {
    const auto& r = ring_[id % ring_.size()];
    if (r.start > 0 && r.end == 0 && now - r.start > timeout) out.push_back(r);
  }
  return out;
}

std::vector<CollectiveRecord> CollectiveLog::in_flight(size_t count) const {
  std::lock_guard lock(mutex_);
  std::vector<CollectiveRecord> out;
  const uint64_t n = std::min<uint64_t>(next_id_, ring_.size());
  for (uint64_t k = 0; k < n && out.size() < count; ++k) {
    const auto& r = ring_[(next_id_ - 1 - k) % ring_.size()];
    if (r.start > 0 && r.end == 0) out.push_back(r);
  }
  return out;
}

CommCounters CollectiveLog::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void CollectiveLog::reset_counters() {
  std::lock_guard lock(mutex_);
  counters_ = {};
}

std::string format_records(const std::vector<CollectiveRecord>& records, double now) {
  std::string out = fmt::format("  {:>6} {:<10} {:>6} {:<15} {:>5} {:>12} {:>10} {:>10}  {}\n",
                                "id", "group", "seq", "op", "peer", "bytes", "start", "took",
                                "state");
  for (const auto& r : records) {
    const std::string peer = r.peer >= 0 ? fmt::format("{}", r.peer) : "-";
    const char* state = r.end > 0 ? "done" : r.start > 0 ? "IN FLIGHT" : "queued";
    const double took = (r.end > 0 ? r.end : now) - (r.start > 0 ? r.start : r.issued);
    out += fmt::format("  {:>6} {:<10} {:>6} {:<15} {:>5} {:>12} {:>9.3f}s {:>9.3f}s  {}{}\n",
                       r.id, r.group, r.seq,
                       comm_op_name(r.op), peer,
                       r.bytes, (r.start > 0 ? r.start : r.issued) - now, took, state,
                       r.async ? " (async)" : "");
  }
  return out;
}

}  // namespace tessera::comm
