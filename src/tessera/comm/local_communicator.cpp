#include "tessera/comm/local_communicator.h"

#include <cstring>

#include "tessera/core/error.h"
#include "tessera/core/timer.h"

namespace tessera::comm {

LocalCommunicator::LocalCommunicator(std::string name, std::shared_ptr<CollectiveLog> log)
    : name_(std::move(name)), log_(log ? std::move(log) : std::make_shared<CollectiveLog>()) {}

int LocalCommunicator::world_rank_of(int group_rank) const {
  TESSERA_CHECK(group_rank == 0, "rank {} is not in single-process group '{}'", group_rank, name_);
  return 0;
}

void LocalCommunicator::check_peer(int peer) const {
  TESSERA_CHECK(peer == 0, "peer {} is not in single-process group '{}'", peer, name_);
}

std::unique_ptr<Communicator> LocalCommunicator::split(int color, int key, std::string name) {
  if (color < 0) return nullptr;
  return std::make_unique<LocalCommunicator>(std::move(name), log_);
}

void LocalCommunicator::record(CommOp op, size_t bytes, bool async, int peer) {
  CollectiveRecord r;
  r.seq = is_collective(op) ? next_collective_seq_++ : next_p2p_seq_++;
  r.op = op;
  r.async = async;
  r.group = name_;
  r.peer = peer;
  r.bytes = bytes;
  r.issued = r.start = now_seconds();
  log_->finish(log_->begin(std::move(r)), now_seconds());
}

void LocalCommunicator::all_reduce(void*, size_t count, DType dtype, ReduceOp) {
  record(CommOp::AllReduce, count * dtype_size(dtype), false, -1);
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, size_t shard_count,
                                       DType dtype, ReduceOp) {
  if (send != recv) std::memmove(recv, send, shard_count * dtype_size(dtype));
  record(CommOp::ReduceScatter, shard_count * dtype_size(dtype), false, -1);
}

void LocalCommunicator::all_gather(const void* send, void* recv, size_t shard_count,
                                   DType dtype) {
  if (send != recv) std::memmove(recv, send, shard_count * dtype_size(dtype));
  record(CommOp::AllGather, shard_count * dtype_size(dtype), false, -1);
}

void LocalCommunicator::broadcast(void*, size_t count, DType dtype, int root) {
  check_peer(root);
  record(CommOp::Broadcast, count * dtype_size(dtype), false, 0);
}

void LocalCommunicator::send(const void* data, size_t count, DType dtype, int peer, int tag) {
  check_peer(peer);
  const auto* bytes = static_cast<const char*>(data);
  mailbox_[tag].emplace_back(bytes, bytes + count * dtype_size(dtype));
  record(CommOp::Send, count * dtype_size(dtype), false, 0);
}

void LocalCommunicator::recv(void* data, size_t count, DType dtype, int peer, int tag) {
  check_peer(peer);
  auto& queue = mailbox_[tag];
  TESSERA_CHECK(!queue.empty(),
                "recv on single-process group '{}' (tag {}) with no message sent: it would hang",
                name_, tag);
  TESSERA_CHECK(queue.front().size() == count * dtype_size(dtype),
                "recv on '{}' (tag {}) expects {} bytes, the message has {}", name_, tag,
                count * dtype_size(dtype), queue.front().size());
  std::memcpy(data, queue.front().data(), queue.front().size());
  queue.pop_front();
  record(CommOp::Recv, count * dtype_size(dtype), false, 0);
}

void LocalCommunicator::barrier() { record(CommOp::Barrier, 0, false, -1); }

Work LocalCommunicator::all_reduce_async(void* data, size_t count, DType dtype, ReduceOp op) {
  all_reduce(data, count, dtype, op);
  return {};
}
Work LocalCommunicator::reduce_scatter_async(const void* send, void* recv, size_t shard_count,
                                             DType dtype, ReduceOp op) {
  reduce_scatter(send, recv, shard_count, dtype, op);
  return {};
}
Work LocalCommunicator::all_gather_async(const void* send, void* recv, size_t shard_count,
                                         DType dtype) {
  all_gather(send, recv, shard_count, dtype);
  return {};
}
Work LocalCommunicator::broadcast_async(void* data, size_t count, DType dtype, int root) {
  broadcast(data, count, dtype, root);
  return {};
}
Work LocalCommunicator::send_async(const void* data, size_t count, DType dtype, int peer,
                                   int tag) {
  send(data, count, dtype, peer, tag);
  return {};
}
Work LocalCommunicator::recv_async(void* data, size_t count, DType dtype, int peer, int tag) {
  recv(data, count, dtype, peer, tag);
  return {};
}
Work LocalCommunicator::barrier_async() {
  barrier();
  return {};
}

}  // namespace tessera::comm
