// One case of the ring-attention tests, shared by the kernels' merge in one
// process (tests/kernels/test_attention_ring.cpp) and context parallelism
// across ranks (tests/mpi/mpi_test_context_parallel.cpp): the heads, the
// sequence, RoPE, the probability dropout (one fixed site, so both sides of
// a comparison draw the same keys) and, across ranks, the K/V exchange.
#pragma once
#include <cstdint>
#include <ostream>

#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/dropout_site.h"

namespace tessera::test {

struct RingAttentionCase {
  int64_t B, T, NH, KVH, HS;
  float base;               // 0: no RoPE
  float drop_p;             // 0: no dropout
  bool all_gather = false;  // across ranks: gather K/V instead of the p2p ring
  AttentionHeads heads() const { return {NH, KVH, HS, base}; }
};

// gtest's name for a case in a failure's message.
inline void PrintTo(const RingAttentionCase& c, std::ostream* os) {
  *os << "B " << c.B << " T " << c.T << " NH " << c.NH << " KVH " << c.KVH << " HS " << c.HS
      << " base " << c.base << " p " << c.drop_p << (c.all_gather ? " all_gather" : "");
}

// The attention-probability dropout site of layer 2 at step 3 (its keys
// depend on the global positions, so a ring at the wrong ones differs).
inline DropoutSite site_of(const RingAttentionCase& c) {
  DropoutSite s;
  s.p = c.drop_p;
  s.seed = 11;
  s.step = 3;
  s.layer = 2;
  s.site = DropoutSiteKind::AttentionProbs;
  s.first_sample = 5;
  return s;
}

}  // namespace tessera::test
