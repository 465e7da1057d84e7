#include "tessera/parallel/zero_partition.h"

#include "tessera/core/error.h"

namespace tessera {

ZeroPartition::ZeroPartition(const ParamLayout& layout, int64_t dp, int64_t dp_rank,
                             int64_t expert_dp, int64_t expert_dp_rank)
    : dp_(dp), rank_(dp_rank) {
  for (const ParamUnit& u : layout.units()) {
    const int64_t n = u.expert ? expert_dp : dp, r = u.expert ? expert_dp_rank : dp_rank;
    TESSERA_CHECK(u.numel() % n == 0, "unit [{}, {}) does not divide by its {} ranks", u.begin,
                  u.end, n);
    const int64_t q = u.numel() / n;
    segments_.push_back({u.begin + r * q, u.begin + (r + 1) * q, shard_numel_});
    slices_.push_back(n);
    shard_numel_ += q;
  }
}

}  // namespace tessera
