#include "tessera/comm/mpi_communicator.h"

#include <climits>
#include <cstring>

#include "tessera/comm/ring_reduce_scatter.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera::comm {
namespace {

// Data movement treats 16-bit types as opaque 16-bit words; reductions check
// for F32 first.
MPI_Datatype mpi_type(DType dtype) {
  return dtype == DType::F32 ? MPI_FLOAT : MPI_UINT16_T;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

int mpi_count(size_t count, const std::string& group) {
  TESSERA_CHECK(count <= size_t(INT_MAX),
                "communication on '{}' of {} elements exceeds MPI's int count; split the buffer",
                group, count);
  return int(count);
}

void check_reducible(DType dtype, const std::string& group) {
  TESSERA_CHECK(dtype == DType::F32, "reduction on '{}' in {}: only f32 reductions exist so far",
                group, dtype_name(dtype));
}

// A non-blocking send/recv: an MPI request, logged complete when observed.
struct RequestWork final : Work::Impl {
  RequestWork(MPI_Request r, std::function<void()> on_done)
      : request(r), on_done(std::move(on_done)) {}
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
    if (on_done) std::exchange(on_done, nullptr)();
  }
  MPI_Request request;
  std::function<void()> on_done;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name,
                                 std::shared_ptr<CommMonitor> monitor)
    : monitor_(std::move(monitor)), name_(std::move(name)) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_dup(comm, &async_comm_);
  MPI_Comm_dup(comm, &p2p_comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);

  MPI_Group group, world_group;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> members(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) members[size_t(r)] = r;
  world_ranks_.resize(size_t(size_));
  MPI_Group_translate_ranks(group, size_, members.data(), world_group, world_ranks_.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);

  group_id_ = monitor_->next_group_id();
  MPI_Allreduce(MPI_IN_PLACE, &group_id_, 1, MPI_INT, MPI_MAX, comm_);
  monitor_->register_group(group_id_, {name_, world_ranks_});
}

MpiCommunicator::~MpiCommunicator() {
  stream_.reset();  // finish queued collectives while their communicator exists
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // the runtime went first; MPI has freed everything
  for (MPI_Comm* c : {&comm_, &async_comm_, &p2p_comm_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

int MpiCommunicator::world_rank_of(int group_rank) const {
  TESSERA_CHECK(group_rank >= 0 && group_rank < size_, "rank {} is not in group '{}' of size {}",
                group_rank, name_, size_);
  return world_ranks_[size_t(group_rank)];
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key, std::string name) {
  MPI_Comm part = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &part);
  if (part == MPI_COMM_NULL) return nullptr;
  auto group = std::make_unique<MpiCommunicator>(part, std::move(name), monitor_);
  MPI_Comm_free(&part);
  return group;
}

// ---- logging -------------------------------------------------------------

MpiCommunicator::Ticket MpiCommunicator::issue(CommOp op, size_t bytes, int peer_world,
                                               bool async) {
  Ticket t;
  t.collective = is_collective(op);
  t.seq = t.collective ? next_collective_seq_++ : next_p2p_seq_++;
  CollectiveRecord record;
  record.seq = t.seq;
  record.op = op;
  record.async = async;
  record.group_id = group_id_;
  record.group = name_;
  record.group_rank = rank_;
  record.group_size = size_;
  record.peer = peer_world;
  record.bytes = bytes;
  record.issued = now_seconds();
  t.log_id = monitor_->log().begin(std::move(record));
  if (t.collective && monitor_->board())
    monitor_->board()->publish_entered(group_id_, t.seq, op, bytes);
  return t;
}

void MpiCommunicator::start(const Ticket& t) { monitor_->log().mark_started(t.log_id, now_seconds()); }

void MpiCommunicator::finish(const Ticket& t) {
  monitor_->log().finish(t.log_id, now_seconds());
  if (t.collective && monitor_->board()) monitor_->board()->publish_completed(group_id_, t.seq);
}

void MpiCommunicator::run_blocking(CommOp op, size_t bytes, int peer_world,
                                   const std::function<void()>& body) {
  const Ticket t = issue(op, bytes, peer_world, false);
  start(t);
  body();
  finish(t);
}

Work MpiCommunicator::run_async(CommOp op, size_t bytes, int peer_world,
                                std::function<void()> body) {
  const Ticket t = issue(op, bytes, peer_world, true);
  if (!stream_) stream_ = std::make_unique<CommStream>();
  return stream_->submit([this, t, body = std::move(body)] {
    start(t);
    body();
    finish(t);
  });
}

// ---- bodies --------------------------------------------------------------

void MpiCommunicator::do_all_reduce(MPI_Comm c, void* data, size_t count, DType dtype,
                                    ReduceOp op) {
  MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count, name_), mpi_type(dtype), mpi_op(op), c);
}

void MpiCommunicator::do_reduce_scatter(MPI_Comm c, const void* send, void* recv,
                                        size_t shard_count, DType dtype, ReduceOp op,
                                        std::vector<float>& scratch) {
  ring_reduce_scatter(c, static_cast<const float*>(send), static_cast<float*>(recv), shard_count,
                      op, scratch);
}

void MpiCommunicator::do_all_gather(MPI_Comm c, const void* send, void* recv, size_t shard_count,
                                    DType dtype) {
  const size_t shard_bytes = shard_count * dtype_size(dtype);
  const bool in_place = static_cast<const char*>(send) ==
                        static_cast<const char*>(recv) + size_t(rank_) * shard_bytes;
  const int n = mpi_count(shard_count, name_);
  MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype), c);
}

// ---- blocking ------------------------------------------------------------

void MpiCommunicator::all_reduce(void* data, size_t count, DType dtype, ReduceOp op) {
  check_reducible(dtype, name_);
  mpi_count(count, name_);  // argument errors throw before the call is logged
  run_blocking(CommOp::AllReduce, count * dtype_size(dtype), -1,
               [&] { do_all_reduce(comm_, data, count, dtype, op); });
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, size_t shard_count,
                                     DType dtype, ReduceOp op) {
  check_reducible(dtype, name_);
  mpi_count(shard_count, name_);
  run_blocking(CommOp::ReduceScatter, size_t(size_) * shard_count * dtype_size(dtype), -1, [&] {
    do_reduce_scatter(comm_, send, recv, shard_count, dtype, op, scratch_);
  });
}

void MpiCommunicator::all_gather(const void* send, void* recv, size_t shard_count, DType dtype) {
  mpi_count(shard_count, name_);
  run_blocking(CommOp::AllGather, size_t(size_) * shard_count * dtype_size(dtype), -1,
               [&] { do_all_gather(comm_, send, recv, shard_count, dtype); });
}

void MpiCommunicator::broadcast(void* data, size_t count, DType dtype, int root) {
  const int n = mpi_count(count, name_);
  run_blocking(CommOp::Broadcast, count * dtype_size(dtype), world_rank_of(root), [&] {
    MPI_Bcast(data, n, mpi_type(dtype), root, comm_);
  });
}

void MpiCommunicator::send(const void* data, size_t count, DType dtype, int peer, int tag) {
  const int n = mpi_count(count, name_);
  run_blocking(CommOp::Send, count * dtype_size(dtype), world_rank_of(peer), [&] {
    MPI_Send(data, n, mpi_type(dtype), peer, tag, p2p_comm_);
  });
}

void MpiCommunicator::recv(void* data, size_t count, DType dtype, int peer, int tag) {
  const int n = mpi_count(count, name_);
  run_blocking(CommOp::Recv, count * dtype_size(dtype), world_rank_of(peer), [&] {
    MPI_Recv(data, n, mpi_type(dtype), peer, tag, p2p_comm_,
             MPI_STATUS_IGNORE);
  });
}

void MpiCommunicator::barrier() {
  run_blocking(CommOp::Barrier, 0, -1, [&] { MPI_Barrier(comm_); });
}

// ---- non-blocking --------------------------------------------------------

Work MpiCommunicator::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  check_reducible(dtype, name_);
  mpi_count(count, name_);
  return run_async(CommOp::AllReduce, count * dtype_size(dtype), -1, [=, this] {
    do_all_reduce(async_comm_, data, count, dtype, op);
  });
}

Work MpiCommunicator::reduce_scatter_async(const void* send, void* recv, size_t shard_count,
                                           DType dtype, ReduceOp op) {
  check_reducible(dtype, name_);
  mpi_count(shard_count, name_);
  return run_async(CommOp::ReduceScatter, size_t(size_) * shard_count * dtype_size(dtype), -1,
                   [=, this] {
                     do_reduce_scatter(async_comm_, send, recv, shard_count, dtype, op,
                                       async_scratch_);
                   });
}

Work MpiCommunicator::all_gather_async(const void* send, void* recv, size_t shard_count,
                                       DType dtype) {
  mpi_count(shard_count, name_);
  return run_async(CommOp::AllGather, size_t(size_) * shard_count * dtype_size(dtype), -1,
                   [=, this] { do_all_gather(async_comm_, send, recv, shard_count, dtype); });
}

Work MpiCommunicator::broadcast_async(void* data, size_t count, DType dtype, int root) {
  const int n = mpi_count(count, name_);
  return run_async(CommOp::Broadcast, count * dtype_size(dtype), world_rank_of(root),
                   [=, this] { MPI_Bcast(data, n, mpi_type(dtype), root, async_comm_); });
}

Work MpiCommunicator::barrier_async() {
  return run_async(CommOp::Barrier, 0, -1, [this] { MPI_Barrier(async_comm_); });
}

Work MpiCommunicator::send_async(const void* data, size_t count, DType dtype, int peer, int tag) {
  const int n = mpi_count(count, name_);
  const Ticket t = issue(CommOp::Send, count * dtype_size(dtype), world_rank_of(peer), true);
  start(t);
  MPI_Request request;
  MPI_Isend(data, n, mpi_type(dtype), peer, tag, p2p_comm_, &request);
  return Work(std::make_unique<RequestWork>(request, [this, t] { finish(t); }));
}

Work MpiCommunicator::recv_async(void* data, size_t count, DType dtype, int peer, int tag) {
  const int n = mpi_count(count, name_);
  const Ticket t = issue(CommOp::Recv, count * dtype_size(dtype), world_rank_of(peer), true);
  start(t);
  MPI_Request request;
  MPI_Irecv(data, n, mpi_type(dtype), peer, tag, p2p_comm_, &request);
  return Work(std::make_unique<RequestWork>(request, [this, t] { finish(t); }));
}

}  // namespace tessera::comm
