#include "tessera/comm/communicator.h"

#include "tessera/core/error.h"

namespace tessera::comm {

void Communicator::reduce_scatter(std::span<const float> send, std::span<float> recv,
                                  ReduceOp op) {
  TESSERA_CHECK(send.size() == recv.size() * size_t(size()),
                "reduce_scatter on '{}': input has {} elements, expected {} x {}", name(),
                send.size(), size(), recv.size());
  reduce_scatter(send.data(), recv.data(), recv.size(), DType::F32, op);
}

Work Communicator::reduce_scatter_async(std::span<const float> send, std::span<float> recv,
                                        ReduceOp op) {
  TESSERA_CHECK(send.size() == recv.size() * size_t(size()),
                "reduce_scatter on '{}': input has {} elements, expected {} x {}", name(),
                send.size(), size(), recv.size());
  return reduce_scatter_async(send.data(), recv.data(), recv.size(), DType::F32, op);
}

void Communicator::all_gather(std::span<const float> send, std::span<float> recv) {
  TESSERA_CHECK(recv.size() == send.size() * size_t(size()),
                "all_gather on '{}': output has {} elements, expected {} x {}", name(),
                recv.size(), size(), send.size());
  all_gather(send.data(), recv.data(), send.size(), DType::F32);
}

Work Communicator::all_gather_async(std::span<const float> send, std::span<float> recv) {
  TESSERA_CHECK(recv.size() == send.size() * size_t(size()),
                "all_gather on '{}': output has {} elements, expected {} x {}", name(),
                recv.size(), size(), send.size());
  return all_gather_async(send.data(), recv.data(), send.size(), DType::F32);
}

std::vector<int> Communicator::world_ranks() const {
  std::vector<int> ranks(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) ranks[size_t(r)] = world_rank_of(r);
  return ranks;
}

}  // namespace tessera::comm
