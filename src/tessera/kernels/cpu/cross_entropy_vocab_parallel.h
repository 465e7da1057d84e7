// Softmax cross-entropy over vocab-parallel logits: each tensor-parallel rank
// holds the columns [vocab_begin, vocab_begin + V) of every row and nobody
// holds the full (N, vocab) matrix. The three row statistics a softmax needs
// (max, sum of exp, target logit) are formed locally here and reduced across
// the ranks by the caller, between the calls below:
//
//   vp_xent_local_max        -> all-reduce(max) of row_max (N)
//   vp_xent_local_sums       -> all-reduce(sum) of sums (2, N)
//   vp_xent_finish           -> losses, lse
//   vp_xent_backward         (no communication: lse is global)
//
// V counts only real vocabulary columns of this slice (vocabulary padding is
// never given a logit, so it is never predicted); V may be 0 on a rank whose
// slice is all padding. A target < 0 is ignored (no loss, no gradient).
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// row_max (N) = max over this slice's columns of logits (N, V); -inf when V = 0.
void vp_xent_local_max(float* row_max, const float* logits, int64_t N, int64_t V);

// Given the global row_max (N): sums (2, N) where sums[0] = sum_v exp(x - max)
// over this slice and sums[1] = the target's logit if this slice holds it, else 0.
void vp_xent_local_sums(float* sums, const float* logits, const float* row_max,
                        const int32_t* targets, int64_t N, int64_t V, int64_t vocab_begin);

// From the reduced statistics: lse (N) = max + log(sum), losses (N) = lse -
// target logit (0 when ignored).
void vp_xent_finish(float* losses, float* lse, const float* row_max, const float* sums,
                    const int32_t* targets, int64_t N);

// dlogits (N, V) = (softmax - onehot(target)) * dloss on this slice's columns,
// written; ignored rows get zeros. dlogits may alias logits.
void vp_xent_backward(float* dlogits, const float* logits, const float* lse,
                      const int32_t* targets, float dloss, int64_t N, int64_t V,
                      int64_t vocab_begin);
// --bf16 / --fp16: dlogits in 16 bits (a separate buffer), as
// cross_entropy_backward_bf16 / _fp16.
void vp_xent_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V,
                           int64_t vocab_begin);
void vp_xent_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                           const int32_t* targets, float dloss, int64_t N, int64_t V,
                           int64_t vocab_begin);

}  // namespace tessera::cpu
