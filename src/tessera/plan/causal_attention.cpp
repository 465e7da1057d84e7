#include "tessera/plan/causal_attention.h"

#include <algorithm>

namespace tessera::plan {

double causal_attention_fraction(int64_t seq, double speedup) {
  if (speedup <= 0 || seq <= 0) return 1.0;
  const double n = double((seq + kCausalAttentionTile - 1) / kCausalAttentionTile);
  // Tiles on or below the diagonal: n (n + 1) / 2 of n^2. At long sequences
  // that tends to 1/2, where the measured speedup holds: scale so that the
  // long-sequence time is 1 / speedup of the non-causal one.
  const double computed = (n + 1) / (2 * n);
  return std::min(1.0, computed * 2.0 / speedup);
}

}  // namespace tessera::plan
