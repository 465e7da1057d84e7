#include "tessera/comm/local_backend.h"

#include <cstring>

#include "tessera/core/error.h"

namespace tessera::comm {
namespace {

// Runs a call that completes at once, reporting it to the log around `body`.
template <typename Body>
Work complete_now(const CommCall& call, Body&& body) {
  call.started();
  body();
  call.finished();
  return {};
}

}  // namespace

std::unique_ptr<CommBackend> LocalBackend::split(int color, int) {
  if (color < 0) return nullptr;
  return std::make_unique<LocalBackend>();
}

Work LocalBackend::iall_reduce(void*, size_t, Precision, ReduceOp, const CommCall& call) {
  return complete_now(call, [] {});  // the sum over one rank is its own data
}

Work LocalBackend::ireduce_scatter(const void* send, void* recv, size_t shard_count, Precision dtype,
                                   ReduceOp, const CommCall& call) {
  return complete_now(call, [&] {
    if (send != recv) std::memmove(recv, send, shard_count * dtype_size(dtype));
  });
}

Work LocalBackend::iall_gather(const void* send, void* recv, size_t shard_count, Precision dtype,
                               const CommCall& call) {
  return complete_now(call, [&] {
    if (send != recv) std::memmove(recv, send, shard_count * dtype_size(dtype));
  });
}

Work LocalBackend::iall_to_all(const void* send, const size_t* send_counts, void* recv,
                               const size_t*, Precision dtype, const CommCall& call) {
  // One rank: its one block goes to itself.
  return complete_now(call, [&] { std::memmove(recv, send, send_counts[0] * dtype_size(dtype)); });
}

Work LocalBackend::ibroadcast(void*, size_t, Precision, int, const CommCall& call) {
  return complete_now(call, [] {});
}

Work LocalBackend::ibarrier(const CommCall& call) { return complete_now(call, [] {}); }

Work LocalBackend::isend(const void* data, size_t count, Precision dtype, int, int tag,
                         const CommCall& call) {
  return complete_now(call, [&] {
    const auto* bytes = static_cast<const char*>(data);
    mailbox_[tag].emplace_back(bytes, bytes + count * dtype_size(dtype));
  });
}

Work LocalBackend::irecv(void* data, size_t count, Precision dtype, int, int tag,
                         const CommCall& call) {
  // Checked before the call starts: a failed receive stays "issued" in the
  // log, never "in flight".
  auto& queue = mailbox_[tag];
  TESSERA_CHECK(!queue.empty(),
                "recv on a single-process group (tag {}) with no message sent: it would hang", tag);
  TESSERA_CHECK(queue.front().size() == count * dtype_size(dtype),
                "recv on a single-process group (tag {}) expects {} bytes, the message has {}", tag,
                count * dtype_size(dtype), queue.front().size());
  return complete_now(call, [&] {
    std::memcpy(data, queue.front().data(), queue.front().size());
    queue.pop_front();
  });
}

}  // namespace tessera::comm
