// Dropout whose mask depends only on where an element is in the model, never
// on the layout that computes it.
//
// Every element a dropout touches is named by
//   (seed, step)                 the key: a fresh mask every optimizer step
//   (layer, site)                which dropout: the global layer index and
//                                which of its dropouts (DropoutSiteKind)
//   (sample, element)            the global sample index (the run's sample
//                                counter, train/trainer.cpp first_sample) and
//                                the element's index within that sample's
//                                tensor in the single-process shape
// and its keep bit is one word of Philox4x32-10 (core/philox.h) at that
// position. A tp rank holding heads 4..7, a sequence-parallel rank holding
// rows 512..1023, a pipeline stage holding layers 6..11, a dp rank holding
// samples 8..15, a recomputation in backward: each names the same elements
// by the same global indices and so draws exactly the mask one process
// draws. Nothing is stored between forward and backward: the mask is drawn
// again (cheaper than storing it here: ten rounds of integer multiplies per
// four elements, against a bit mask's memory traffic and its slot in the
// recompute bookkeeping; see docs/mixed_precision.md for the measurement).
//
// Counter layout (one Philox call serves four consecutive elements):
//   c0 = element/4 (low 32 bits), c1 = element/4 >> 32 (16 bits) | sample >> 32 << 16,
//   c2 = sample (low 32 bits),    c3 = layer << 8 | site
// so a sample may hold up to 2^50 elements and a run up to 2^48 samples.
#pragma once
#include <cstdint>

#include "tessera/kernels/dropout_site.h"

namespace tessera::cpu {

using ::tessera::DropoutSite;
using ::tessera::DropoutSiteKind;

// A site's Philox key and keep threshold, derived once per call.
struct DropoutStream {
  uint32_t k0 = 0, k1 = 0;  // Philox key from (seed, step)
  uint32_t c3 = 0;          // layer << 8 | site
  uint32_t threshold = 0;   // keep iff word >= threshold: P(keep) = 1 - threshold / 2^32
  explicit DropoutStream(const DropoutSite& s);
};

// Attention probabilities: element (head hg, query i, key j) of a sample is
// (hg * T + i) * T + j, hg the global head index.
inline int64_t attention_prob_element(int64_t hg, int64_t i, int64_t j, int64_t T) {
  return (hg * T + i) * T + j;
}

// bits[i] = the 32 random bits of element e0 + i of `sample`, i < n.
void dropout_bits(const DropoutStream& st, int64_t sample, int64_t e0, int64_t n, uint32_t* bits);

// x (rows, C) *= mask / (1 - p), in place, for rows of token-major
// activations: local row r is global row row0 + r of the micro-batch's
// (B*T) rows, i.e. sample first_sample + (row0 + r) / T, token (row0 + r) % T,
// element token * C + c. Used for the forward of a hidden dropout and,
// with the same arguments, for its backward (the gradient takes the same
// mask and the same scale).
void dropout_rows(float* x, int64_t rows, int64_t C, int64_t row0, int64_t T,
                  const DropoutSite& site);

}  // namespace tessera::cpu
