// Softmax cross-entropy fused over logits. A target < 0 is ignored (no loss,
// no gradient). Only the first V columns of each row are real classes:
// vocabulary padding is never predicted.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"

namespace tessera::cpu {

// logits (N, V); targets (N); losses (N) = logsumexp(row) - row[target] (0 when ignored);
// lse (N) saved for backward.
void cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets,
                           int64_t N, int64_t V);

// dlogits (N, V) = (softmax(row) - onehot(target)) * dloss, written (not
// accumulated); rows with an ignored target get zeros. dlogits may alias logits.
void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, float dloss, int64_t N, int64_t V);
// --bf16 / --fp16: the same gradient rounded once into 16 bits, since it
// only feeds the LM head's backward GEMMs (16-bit operands); logits stay
// fp32 and dlogits is a separate buffer.
void cross_entropy_backward_bf16(bf16_t* dlogits, const float* logits, const float* lse,
                                 const int32_t* targets, float dloss, int64_t N, int64_t V);
void cross_entropy_backward_fp16(fp16_t* dlogits, const float* logits, const float* lse,
                                 const int32_t* targets, float dloss, int64_t N, int64_t V);

}  // namespace tessera::cpu
