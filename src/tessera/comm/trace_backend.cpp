#include "tessera/comm/trace_backend.h"

namespace tessera::comm {

std::unique_ptr<CommBackend> TraceBackend::split(int color, int key) {
  if (color < 0) return nullptr;
  // Only this rank runs, so nothing tells how the others split: the
  // sub-group is the traced group again (same rank, same size), and its
  // calls go to the same sink.
  return std::make_unique<TraceBackend>(rank_, size_, sink_);
}

Work TraceBackend::record(CommOp op, const void* data, size_t count, Precision dtype,
                          const CommCall& call) {
  call.started();
  if (call.logged() && sink_)
    sink_({op, dtype, count, data_size(op, count, dtype_size(dtype), size_), size_, data});
  call.finished();
  return {};
}

Work TraceBackend::iall_reduce(void* data, size_t count, Precision dtype, ReduceOp,
                               const CommCall& call) {
  return record(CommOp::AllReduce, data, count, dtype, call);
}

Work TraceBackend::ireduce_scatter(const void*, void* recv, size_t shard_count, Precision dtype,
                                   ReduceOp, const CommCall& call) {
  return record(CommOp::ReduceScatter, recv, shard_count, dtype, call);
}

Work TraceBackend::iall_gather(const void* send, void*, size_t shard_count, Precision dtype,
                               const CommCall& call) {
  return record(CommOp::AllGather, send, shard_count, dtype, call);
}

Work TraceBackend::ibroadcast(void* data, size_t count, Precision dtype, int, const CommCall& call) {
  return record(CommOp::Broadcast, data, count, dtype, call);
}

Work TraceBackend::isend(const void* data, size_t count, Precision dtype, int, int,
                         const CommCall& call) {
  return record(CommOp::Send, data, count, dtype, call);
}

Work TraceBackend::irecv(void* data, size_t count, Precision dtype, int, int, const CommCall& call) {
  return record(CommOp::Recv, data, count, dtype, call);
}

Work TraceBackend::iall_to_all(const void* send, const size_t* send_counts, void*, const size_t*,
                               Precision dtype, const CommCall& call) {
  size_t total = 0;  // the data size counts what this rank sends
  for (int j = 0; j < size_; ++j) total += send_counts[j];
  return record(CommOp::AllToAll, send, total, dtype, call);
}

Work TraceBackend::ibarrier(const CommCall& call) {
  return record(CommOp::Barrier, nullptr, 0, Precision::Fp32, call);
}

}  // namespace tessera::comm
