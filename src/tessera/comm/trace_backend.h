// TraceBackend: a CommBackend that moves nothing and writes down each call
// the engine makes, for the op trace (model/op_trace.h). It stands for one
// rank (`rank` of `size`) of a group whose other members never run: every
// call completes at once and leaves the buffers as they are, so the model
// code above it runs on buffers nobody allocated.
//
// The cost of a call is its data size S (comm_op.h: data_size), the same
// number the Communicator logs and the planner prices.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "tessera/comm/comm_backend.h"

namespace tessera::comm {

struct TracedCall {
  CommOp op = CommOp::AllReduce;
  Precision dtype = Precision::Fp32;
  size_t count = 0;      // elements as called: the buffer, or one shard for reduce_scatter /
                         // all_gather, or all_to_all's blocks summed
  size_t bytes = 0;      // data size S (comm_op.h)
  int group_size = 1;
  const void* data = nullptr;  // the buffer (reduce_scatter: recv; all_gather, all_to_all: send)
};

class TraceBackend final : public CommBackend {
 public:
  using Sink = std::function<void(const TracedCall&)>;
  // sink: receives every logged call in issue order (set-up traffic of the
  // Communicator itself is not the engine's and is left out).
  TraceBackend(int rank, int size, Sink sink) : rank_(rank), size_(size), sink_(std::move(sink)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int world_rank_of(int group_rank) const override { return group_rank; }
  // A sub-group of the traced group: traced into the same sink.
  std::unique_ptr<CommBackend> split(int color, int key) override;

#define TESSERA_COMM_PRIMITIVE(name, params) Work name params override;
#include "tessera/comm/comm_primitives.inc"
#undef TESSERA_COMM_PRIMITIVE

 private:
  Work record(CommOp op, const void* data, size_t count, Precision dtype, const CommCall& call);

  int rank_, size_;
  Sink sink_;
};

}  // namespace tessera::comm
