#include "tessera/comm/communicator.h"

#include "tessera/comm/comm_monitor.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera::comm {

Communicator::Communicator(std::unique_ptr<CommBackend> backend, std::string name,
                           std::shared_ptr<CommMonitor> monitor)
    : monitor_(std::move(monitor)),
      name_(std::move(name)),
      backend_(std::move(backend)),
      rank_(backend_->rank()),
      size_(backend_->size()) {
  // Group ids index the progress board, so the members must agree on one:
  // each proposes its next free id and they take the largest. Ids are small
  // integers (below ProgressBoard::kMaxGroups), exact in f32.
  float agreed = float(monitor_->next_group_id());
  backend_->iall_reduce(&agreed, 1, Precision::Fp32, ReduceOp::Max, CommCall::unlogged(true)).wait();
  group_id_ = int(agreed);
  monitor_->register_group(group_id_, {name_, world_ranks()});
}

Communicator::~Communicator() = default;

int Communicator::world_rank_of(int group_rank) const {
  TESSERA_CHECK(group_rank >= 0 && group_rank < size_, "rank {} is not in group '{}' of size {}",
                group_rank, name_, size_);
  return backend_->world_rank_of(group_rank);
}

CollectiveLog& Communicator::log() { return monitor_->log(); }

std::unique_ptr<Communicator> Communicator::split(int color, int key, std::string name) {
  std::unique_ptr<CommBackend> part = backend_->split(color, key);
  if (!part) return nullptr;
  return std::make_unique<Communicator>(std::move(part), std::move(name), monitor_);
}

std::vector<int> Communicator::world_ranks() const {
  std::vector<int> ranks(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) ranks[size_t(r)] = world_rank_of(r);
  return ranks;
}

// ---- checks and logging ----------------------------------------------------

void Communicator::check_count(size_t count) const {
  TESSERA_CHECK(count <= backend_->max_count(),
                "communication on '{}' of {} elements exceeds the backend's limit of {} per call; "
                "split the buffer",
                name_, count, backend_->max_count());
}

void Communicator::check_reducible(Precision dtype, bool f64_allowed) const {
  TESSERA_CHECK(dtype == Precision::Fp32 || dtype == Precision::Bf16 || (f64_allowed && dtype == Precision::Fp64),
                "reduction on '{}' in {}: only f32, bf16{} reductions exist so far", name_,
                dtype_name(dtype), f64_allowed ? " and f64" : "");
}

CommCall Communicator::issue(CommOp op, size_t bytes, int peer_world, bool blocking) {
  const bool collective = is_collective(op);
  CollectiveRecord record;
  record.seq = collective ? next_collective_seq_++ : next_p2p_seq_++;
  record.op = op;
  record.async = !blocking;
  record.group_id = group_id_;
  record.group = name_;
  record.group_rank = rank_;
  record.group_size = size_;
  record.peer = peer_world;
  record.bytes = bytes;
  record.issued = now_seconds();
  const uint64_t seq = record.seq;
  const uint64_t log_id = monitor_->log().begin(std::move(record));
  if (collective && monitor_->board())
    monitor_->board()->publish_entered(group_id_, seq, op, bytes);
  return CommCall(blocking, monitor_.get(), log_id, group_id_, seq, collective);
}

void CommCall::started() const {
  if (monitor_) monitor_->log().mark_started(log_id_, now_seconds());
}

void CommCall::finished() const {
  if (!monitor_) return;
  monitor_->log().finish(log_id_, now_seconds());
  if (collective_ && monitor_->board()) monitor_->board()->publish_completed(group_id_, seq_);
}

// ---- each op once ------------------------------------------------------------
// Data sizes follow comm_op.h: the full buffer for reduce_scatter/all_gather.

Work Communicator::start_all_reduce(void* data, size_t count, Precision dtype, ReduceOp op,
                                    bool blocking) {
  check_reducible(dtype, /*f64_allowed=*/true);
  check_count(count);
  const CommCall call =
      issue(CommOp::AllReduce, data_size(CommOp::AllReduce, count, dtype_size(dtype), size_), -1,
            blocking);
  return backend_->iall_reduce(data, count, dtype, op, call);
}

Work Communicator::start_reduce_scatter(const void* send, void* recv, size_t shard_count,
                                        Precision dtype, ReduceOp op, bool blocking) {
  check_reducible(dtype, /*f64_allowed=*/false);  // the ring sums f32 or bf16
  check_count(shard_count);
  const size_t bytes =
      data_size(CommOp::ReduceScatter, shard_count, dtype_size(dtype), size_);
  const CommCall call = issue(CommOp::ReduceScatter, bytes, -1, blocking);
  return backend_->ireduce_scatter(send, recv, shard_count, dtype, op, call);
}

Work Communicator::start_all_gather(const void* send, void* recv, size_t shard_count, Precision dtype,
                                    bool blocking) {
  check_count(shard_count);
  const size_t bytes = data_size(CommOp::AllGather, shard_count, dtype_size(dtype), size_);
  const CommCall call = issue(CommOp::AllGather, bytes, -1, blocking);
  return backend_->iall_gather(send, recv, shard_count, dtype, call);
}

Work Communicator::start_broadcast(void* data, size_t count, Precision dtype, int root,
                                   bool blocking) {
  check_count(count);
  const int root_world = world_rank_of(root);
  const CommCall call = issue(CommOp::Broadcast, count * dtype_size(dtype), root_world, blocking);
  return backend_->ibroadcast(data, count, dtype, root, call);
}

Work Communicator::start_send(const void* data, size_t count, Precision dtype, int peer, int tag,
                              bool blocking) {
  check_count(count);
  const int peer_world = world_rank_of(peer);
  const CommCall call = issue(CommOp::Send, count * dtype_size(dtype), peer_world, blocking);
  return backend_->isend(data, count, dtype, peer, tag, call);
}

Work Communicator::start_recv(void* data, size_t count, Precision dtype, int peer, int tag,
                              bool blocking) {
  check_count(count);
  const int peer_world = world_rank_of(peer);
  const CommCall call = issue(CommOp::Recv, count * dtype_size(dtype), peer_world, blocking);
  return backend_->irecv(data, count, dtype, peer, tag, call);
}

Work Communicator::start_all_to_all(const void* send, std::span<const size_t> send_counts,
                                    void* recv, std::span<const size_t> recv_counts,
                                    Precision dtype, bool blocking) {
  TESSERA_CHECK(send_counts.size() == size_t(size_) && recv_counts.size() == size_t(size_),
                "all_to_all on '{}': {} send and {} receive counts for a group of {}", name_,
                send_counts.size(), recv_counts.size(), size_);
  TESSERA_CHECK(send_counts[size_t(rank_)] == recv_counts[size_t(rank_)],
                "all_to_all on '{}': rank {} sends itself {} elements but expects {}", name_,
                rank_, send_counts[size_t(rank_)], recv_counts[size_t(rank_)]);
  size_t sent = 0, received = 0;
  for (int j = 0; j < size_; ++j) sent += send_counts[size_t(j)], received += recv_counts[size_t(j)];
  // The totals bound every block and every block's offset (MPI's are ints).
  check_count(sent);
  check_count(received);
  const size_t esize = dtype_size(dtype);
  const char* s = static_cast<const char*>(send);
  const char* r = static_cast<const char*>(recv);
  TESSERA_CHECK(sent == 0 || received == 0 || s + sent * esize <= r || r + received * esize <= s,
                "all_to_all on '{}': the send and receive buffers overlap", name_);
  const CommCall call =
      issue(CommOp::AllToAll, data_size(CommOp::AllToAll, sent, esize, size_), -1, blocking);
  return backend_->iall_to_all(send, send_counts.data(), recv, recv_counts.data(), dtype, call);
}

// ---- blocking: the async form, waited for at once ---------------------------

void Communicator::all_reduce(void* data, size_t count, Precision dtype, ReduceOp op) {
  start_all_reduce(data, count, dtype, op, true).wait();
}
void Communicator::reduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype,
                                  ReduceOp op) {
  start_reduce_scatter(send, recv, shard_count, dtype, op, true).wait();
}
void Communicator::all_gather(const void* send, void* recv, size_t shard_count, Precision dtype) {
  start_all_gather(send, recv, shard_count, dtype, true).wait();
}
void Communicator::broadcast(void* data, size_t count, Precision dtype, int root) {
  start_broadcast(data, count, dtype, root, true).wait();
}
void Communicator::send(const void* data, size_t count, Precision dtype, int peer, int tag) {
  start_send(data, count, dtype, peer, tag, true).wait();
}
void Communicator::recv(void* data, size_t count, Precision dtype, int peer, int tag) {
  start_recv(data, count, dtype, peer, tag, true).wait();
}
void Communicator::barrier() { backend_->ibarrier(issue(CommOp::Barrier, 0, -1, true)).wait(); }

void Communicator::all_to_all(const void* send, std::span<const size_t> send_counts, void* recv,
                              std::span<const size_t> recv_counts, Precision dtype) {
  start_all_to_all(send, send_counts, recv, recv_counts, dtype, true).wait();
}

std::vector<size_t> Communicator::exchange_counts(std::span<const size_t> send_counts) {
  TESSERA_CHECK(send_counts.size() == size_t(size_),
                "exchange_counts on '{}': {} counts for a group of {}", name_, send_counts.size(),
                size_);
  // As doubles: exact below 2^53, and a type every backend moves.
  const std::vector<double> out(send_counts.begin(), send_counts.end());
  std::vector<double> in(static_cast<size_t>(size_));
  const std::vector<size_t> ones(size_t(size_), 1);
  all_to_all(out.data(), ones, in.data(), ones, Precision::Fp64);
  return std::vector<size_t>(in.begin(), in.end());
}

// ---- non-blocking ------------------------------------------------------------

Work Communicator::all_reduce_async(void* data, size_t count, Precision dtype, ReduceOp op) {
  return start_all_reduce(data, count, dtype, op, false);
}
Work Communicator::reduce_scatter_async(const void* send, void* recv, size_t shard_count,
                                        Precision dtype, ReduceOp op) {
  return start_reduce_scatter(send, recv, shard_count, dtype, op, false);
}
Work Communicator::all_gather_async(const void* send, void* recv, size_t shard_count,
                                    Precision dtype) {
  return start_all_gather(send, recv, shard_count, dtype, false);
}
Work Communicator::broadcast_async(void* data, size_t count, Precision dtype, int root) {
  return start_broadcast(data, count, dtype, root, false);
}
Work Communicator::send_async(const void* data, size_t count, Precision dtype, int peer, int tag) {
  return start_send(data, count, dtype, peer, tag, false);
}
Work Communicator::recv_async(void* data, size_t count, Precision dtype, int peer, int tag) {
  return start_recv(data, count, dtype, peer, tag, false);
}
Work Communicator::barrier_async() {
  return backend_->ibarrier(issue(CommOp::Barrier, 0, -1, false));
}

Work Communicator::all_to_all_async(const void* send, std::span<const size_t> send_counts,
                                    void* recv, std::span<const size_t> recv_counts,
                                    Precision dtype) {
  return start_all_to_all(send, send_counts, recv, recv_counts, dtype, false);
}

// ---- fp32 conveniences -------------------------------------------------------

void Communicator::reduce_scatter(std::span<const float> send, std::span<float> recv,
                                  ReduceOp op) {
  TESSERA_CHECK(send.size() == recv.size() * size_t(size()),
                "reduce_scatter on '{}': input has {} elements, expected {} x {}", name(),
                send.size(), size(), recv.size());
  reduce_scatter(send.data(), recv.data(), recv.size(), Precision::Fp32, op);
}

Work Communicator::reduce_scatter_async(std::span<const float> send, std::span<float> recv,
                                        ReduceOp op) {
  TESSERA_CHECK(send.size() == recv.size() * size_t(size()),
                "reduce_scatter on '{}': input has {} elements, expected {} x {}", name(),
                send.size(), size(), recv.size());
  return reduce_scatter_async(send.data(), recv.data(), recv.size(), Precision::Fp32, op);
}

void Communicator::all_gather(std::span<const float> send, std::span<float> recv) {
  TESSERA_CHECK(recv.size() == send.size() * size_t(size()),
                "all_gather on '{}': output has {} elements, expected {} x {}", name(),
                recv.size(), size(), send.size());
  all_gather(send.data(), recv.data(), send.size(), Precision::Fp32);
}

Work Communicator::all_gather_async(std::span<const float> send, std::span<float> recv) {
  TESSERA_CHECK(recv.size() == send.size() * size_t(size()),
                "all_gather on '{}': output has {} elements, expected {} x {}", name(),
                recv.size(), size(), send.size());
  return all_gather_async(send.data(), recv.data(), send.size(), Precision::Fp32);
}

}  // namespace tessera::comm
