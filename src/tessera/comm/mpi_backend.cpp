#include "tessera/comm/mpi_backend.h"

#include <array>
#include <climits>

#include "tessera/comm/ring_reduce_scatter.h"
#include "tessera/core/bf16.h"

namespace tessera::comm {
namespace {

// Data movement treats 16-bit types as opaque 16-bit words; the Communicator
// lets only F32, BF16 and (into all-reduce) F64 into reductions.
MPI_Datatype mpi_type(Precision dtype) {
  switch (dtype) {
    case Precision::Fp32: return MPI_FLOAT;
    case Precision::Fp64: return MPI_DOUBLE;
    default: return MPI_UINT16_T;
  }
}

// MPI has no bf16 type and so no bf16 sum: a user-defined operation on
// 16-bit words that adds pairs in fp32 (exact) and rounds the sum back to
// bf16 (to nearest even), one rounding per pairwise combination, as a bf16
// all-reduce on a GPU rounds after each step. Commutative, so MPI may pick
// any reduction order (the order still depends only on the group size).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(static_cast<bf16_t*>(inout), static_cast<const bf16_t*>(in),
              static_cast<const bf16_t*>(inout), size_t(*len), ReduceOp::Sum);
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_into(static_cast<bf16_t*>(inout), static_cast<const bf16_t*>(in),
              static_cast<const bf16_t*>(inout), size_t(*len), ReduceOp::Max);
}

// Created once, on first use (after MPI_Init, on the caller's thread: the
// static's initialisation is thread-safe); freed by MPI_Finalize.
MPI_Op bf16_op(ReduceOp op) {
  static const std::array<MPI_Op, 2> ops = [] {
    MPI_Op sum, max;
    MPI_Op_create(&bf16_sum, /*commute=*/1, &sum);
    MPI_Op_create(&bf16_max, /*commute=*/1, &max);
    return std::array<MPI_Op, 2>{sum, max};
  }();
  return op == ReduceOp::Sum ? ops[0] : ops[1];
}

MPI_Op mpi_op(ReduceOp op, Precision dtype) {
  if (dtype == Precision::Bf16) return bf16_op(op);
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

// A non-blocking send/recv: an MPI request, logged complete when observed.
struct RequestWork final : Work::Impl {
  RequestWork(MPI_Request r, CommCall call) : request(r), call(std::move(call)) {}
  void wait() override {
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    complete();
  }
  bool test() override {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) complete();
    return done != 0;
  }
  void complete() {
    if (!completed) call.finished();
    completed = true;
  }
  MPI_Request request;
  CommCall call;
  bool completed = false;
};

}  // namespace

MpiBackend::MpiBackend(MPI_Comm comm) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_dup(comm, &async_comm_);
  MPI_Comm_dup(comm, &p2p_comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);

  MPI_Group group, world_group;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> members(static_cast<size_t>(size_));  // (size) 0, 1, ..., size-1
  for (int r = 0; r < size_; ++r) members[size_t(r)] = r;
  world_ranks_.resize(size_t(size_));
  MPI_Group_translate_ranks(group, size_, members.data(), world_group, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
}

MpiBackend::~MpiBackend() {
  stream_.reset();  // finish queued collectives while their communicator exists
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // the runtime went first; MPI has freed everything
  for (MPI_Comm* c : {&comm_, &async_comm_, &p2p_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

size_t MpiBackend::max_count() const { return size_t(INT_MAX); }

std::unique_ptr<CommBackend> MpiBackend::split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &part);
  if (part == MPI_COMM_NULL) return nullptr;
  auto backend = std::make_unique<MpiBackend>(part);
  MPI_Comm_free(&part);
  return backend;
}

Work MpiBackend::run_collective(const CommCall& call, Body body) {
  if (call.blocking()) {
    call.started();
    body(comm_, scratch_);
    call.finished();
    return {};
  }
  if (!stream_) stream_ = std::make_unique<CommStream>();
  return stream_->submit([this, call, body = std::move(body)] {
    call.started();
    body(async_comm_, async_scratch_);
    call.finished();
  });
}

// ---- collectives ---------------------------------------------------------

Work MpiBackend::iall_reduce(void* data, size_t count, Precision dtype, ReduceOp op,
                             const CommCall& call) {
  const MPI_Op mop = mpi_op(op, dtype);  // here, not on the stream: the bf16 op is created once
  return run_collective(call, [=](MPI_Comm c, std::vector<float>&) {
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), mpi_type(dtype), mop, c);
  });
}

Work MpiBackend::ireduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype,
                                 ReduceOp op, const CommCall& call) {
  return run_collective(call, [=](MPI_Comm c, std::vector<float>& scratch) {
    if (dtype == Precision::Bf16)
      ring_reduce_scatter(c, static_cast<const bf16_t*>(send), static_cast<bf16_t*>(recv),
                          shard_count, op, scratch);
    else
      ring_reduce_scatter(c, static_cast<const float*>(send), static_cast<float*>(recv),
                          shard_count, op, scratch);
  });
}

Work MpiBackend::iall_gather(const void* send, void* recv, size_t shard_count, Precision dtype,
                             const CommCall& call) {
  const size_t shard_bytes = shard_count * dtype_size(dtype);
  const bool in_place = static_cast<const char*>(send) ==
                        static_cast<const char*>(recv) + size_t(rank_) * shard_bytes;
  return run_collective(call, [=](MPI_Comm c, std::vector<float>&) {
    const int n = int(shard_count);
    MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype),
                  c);
  });
}

Work MpiBackend::iall_to_all(const void* send, const size_t* send_counts, void* recv,
                             const size_t* recv_counts, Precision dtype, const CommCall& call) {
  // MPI wants int counts and displacements (the Communicator checked that
  // the totals fit), held until the call ends: copied into the body.
  const size_t n = static_cast<size_t>(size_);
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  for (size_t j = 0, so = 0, ro = 0; j < n; ++j) {
    sc[j] = int(send_counts[j]), sd[j] = int(so), so += send_counts[j];
    rc[j] = int(recv_counts[j]), rd[j] = int(ro), ro += recv_counts[j];
  }
  return run_collective(call, [=](MPI_Comm c, std::vector<float>&) {
    MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(dtype), recv, rc.data(), rd.data(),
                  mpi_type(dtype), c);
  });
}

Work MpiBackend::ibroadcast(void* data, size_t count, Precision dtype, int root,
                            const CommCall& call) {
  return run_collective(call, [=](MPI_Comm c, std::vector<float>&) {
    MPI_Bcast(data, int(count), mpi_type(dtype), root, c);
  });
}

Work MpiBackend::ibarrier(const CommCall& call) {
  return run_collective(call, [](MPI_Comm c, std::vector<float>&) { MPI_Barrier(c); });
}

// ---- point to point ------------------------------------------------------

Work MpiBackend::isend(const void* data, size_t count, Precision dtype, int peer, int tag,
                       const CommCall& call) {
  call.started();
  if (call.blocking()) {
    MPI_Send(data, int(count), mpi_type(dtype), peer, tag, p2p_comm_);
    call.finished();
    return {};
  }
  MPI_Request request;
  MPI_Isend(data, int(count), mpi_type(dtype), peer, tag, p2p_comm_, &request);
  return Work(std::make_unique<RequestWork>(request, call));
}

Work MpiBackend::irecv(void* data, size_t count, Precision dtype, int peer, int tag,
                       const CommCall& call) {
  call.started();
  if (call.blocking()) {
    MPI_Recv(data, int(count), mpi_type(dtype), peer, tag, p2p_comm_, MPI_STATUS_IGNORE);
    call.finished();
    return {};
  }
  MPI_Request request;
  MPI_Irecv(data, int(count), mpi_type(dtype), peer, tag, p2p_comm_, &request);
  return Work(std::make_unique<RequestWork>(request, call));
}

}  // namespace tessera::comm
