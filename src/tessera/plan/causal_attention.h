// Causal attention on a tile-skipping flash kernel. FlashAttention-2 (and the
// Hopper kernels built like it) walks the score matrix in square tiles and
// skips every tile that lies wholly above the diagonal of a causal mask, so a
// causal pass computes about half the matrix the planner's op list counts
// (4 b s^2 h forward: the full, non-causal product). The masked diagonal
// tiles and the uneven work per row keep it from a full 2x: FlashAttention-2's
// paper measures causal "1.7-1.8x" faster than non-causal at long sequences.
#pragma once
#include <cstdint>

#include "tessera/plan/system.h"

namespace tessera::plan {

// The tile FlashAttention-2 steps over queries and keys (T. Dao,
// arXiv:2307.08691, sec. 3.3: block sizes {64, 128} x {64, 128}; 128 for the
// head dimension 128 of the planned models).
inline constexpr int64_t kCausalAttentionTile = 128;

// Fraction of the non-causal attention time a causal pass over `seq` tokens
// takes on a kernel whose causal speedup at long sequences is `speedup`
// (SystemSpec::attention_causal_speedup): the share of tiles on or below the
// diagonal, (n + 1) / 2n for n = ceil(seq / tile), over the share at long
// sequences (1/2), divided by `speedup`; at most 1 (a single tile is all
// computed). speedup <= 0: the kernel computes the whole matrix (1).
double causal_attention_fraction(int64_t seq, double speedup);

}  // namespace tessera::plan
