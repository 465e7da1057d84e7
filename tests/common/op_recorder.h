// What a real run executed, beside the op trace (model/op_trace.h), for
// tests/model/test_op_list.cpp (one process) and
// tests/mpi/mpi_test_op_list.cpp (tp 2, with and without SP).
//
// The engine runs one micro-batch of a whole (several-layer) model with
// real buffers on kernels::TraceBackend over the CPU backend, which writes
// each call down with its declared cost and then computes it; the tp
// group's collective log says what it communicated. The trace, run on
// buffers nobody allocated, must have issued the same calls: its entries,
// laid out as a whole model runs them (forward: embedding, every layer,
// head; backward: head, then per layer its recomputation and backward,
// then the embedding), equal the executed calls one by one, in order.
#pragma once
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "tessera/comm/collective_log.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/trace_backend.h"
#include "tessera/model/op_list.h"

namespace tessera::test {

// A kernel call or an op-list entry, as the comparison sees both.
struct Call {
  std::string kernel;
  int cls = 0;  // OpClass
  Precision dtype = Precision::Fp32;
  int64_t m = 0, n = 0, k = 0, batch = 1, elements = 0, mask_draws = 0;
  double read = 0, written = 0, flops = 0;
  bool operator==(const Call&) const = default;
};

inline Call call_of(const OpEntry& e) {
  return {e.kernel, int(e.cls), e.dtype, e.m, e.n, e.k, e.batch, e.elements,
          e.mask_draws, e.bytes_read, e.bytes_written, e.flops};
}

// Through the trace's own mapping (op_entry_of), so the two cannot differ in it.
inline Call call_of(const kernels::KernelCall& c) { return call_of(op_entry_of(c)); }

inline std::string describe(const std::vector<Call>& calls) {
  std::string s;
  for (const Call& c : calls)
    s += fmt::format("  {} {} ({}, {}, {}, {}) {} elements, {} + {} bytes, {} flops, {} draws\n",
                     c.kernel, precision_name(c.dtype), c.m, c.n, c.k, c.batch, c.elements,
                     c.read, c.written, c.flops, c.mask_draws);
  return s;
}

// The CPU backend, recording: each call's declared cost into `calls`
// (while `on`), then the computation.
struct RecordingCpu {
  std::vector<Call> calls;
  bool on = true;
  kernels::TraceBackend backend{
      [this](const kernels::KernelCall& c) {
        if (on) calls.push_back(call_of(c));
      },
      &kernels::cpu_backend()};
  std::vector<Call> take() { return std::exchange(calls, {}); }
};

// The kernel entries of `list` in the given phases.
inline void append_calls(std::vector<Call>& out, const std::vector<OpEntry>& list,
                         std::initializer_list<OpPhase> phases) {
  for (const OpEntry& e : list) {
    if (e.cls == OpClass::Collective) continue;
    for (OpPhase p : phases)
      if (e.phase == p) out.push_back(call_of(e));
  }
}

// A collective as the log and the list both say it: kind and data size.
using RanCollective = std::pair<std::string, size_t>;

inline std::vector<RanCollective> collectives_of(const std::vector<comm::CollectiveRecord>& log,
                                                 const std::string& group) {
  std::vector<RanCollective> out;
  for (const auto& r : log)
    if (r.group == group) out.emplace_back(std::string(comm::comm_op_name(r.op)), r.bytes);
  return out;
}

inline void append_collectives(std::vector<RanCollective>& out, const std::vector<OpEntry>& list,
                               std::initializer_list<OpPhase> phases) {
  for (const OpEntry& e : list) {
    if (e.cls != OpClass::Collective) continue;
    for (OpPhase p : phases)
      if (e.phase == p) out.emplace_back(e.kernel, size_t(e.bytes));
  }
}

// What the trace says a whole model of `layers` layers runs, kernels or
// collectives (`append`: append_calls or append_collectives).
template <typename T, typename Append>
std::vector<T> whole_model(const OpList& ol, int64_t layers, bool forward, Append append) {
  std::vector<T> out;
  if (forward) {
    append(out, ol.embed, {OpPhase::Forward});
    for (int64_t l = 0; l < layers; ++l) append(out, ol.layer, {OpPhase::Forward});
    append(out, ol.head, {OpPhase::Forward});
  } else {
    append(out, ol.head, {OpPhase::Backward});
    for (int64_t l = 0; l < layers; ++l) append(out, ol.layer, {OpPhase::Recompute, OpPhase::Backward});
    append(out, ol.embed, {OpPhase::Backward});
  }
  return out;
}

}  // namespace tessera::test
