#include "tessera/parallel/zero_partition.h"

#include "tessera/core/error.h"

namespace tessera {

ZeroPartition::ZeroPartition(const ParamLayout& layout, int64_t dp, int64_t dp_rank)
    : dp_(dp), rank_(dp_rank) {
  for (const ParamUnit& u : layout.units()) {
    TESSERA_CHECK(u.numel() % dp == 0, "unit [{}, {}) does not divide by dp {}", u.begin, u.end,
                  dp);
    const int64_t q = u.numel() / dp;
    segments_.push_back({u.begin + dp_rank * q, u.begin + (dp_rank + 1) * q, u.begin / dp});
    shard_numel_ += q;
  }
}

}  // namespace tessera
