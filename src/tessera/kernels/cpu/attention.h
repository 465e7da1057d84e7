// Causal multi-head self-attention, computed blockwise (flash style): the
// (T, T) score matrix is never stored. Forward saves the log-sum-exp of each
// query row; backward recomputes the scores from it.
//
// qkv (B, T, 3*C) holds [q | k | v] along the last dim, C = NH * HS, head h in
// columns h*HS .. h*HS+HS-1 of each part. Under tensor parallelism NH and C
// are the rank's local heads and width, the layout is the same.
#pragma once
#include <cstdint>

#include "tessera/core/dtype.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/cpu/dropout.h"

namespace tessera::cpu {

// out (B, T, C) = dropout(softmax(q k^T / sqrt(HS), causal)) v per head;
// lse (B, NH, T) of the scores (before dropout). drop: the attention-
// probability dropout site (kernels/cpu/dropout.h), null or p = 0 for none;
// the mask is drawn from the position of every probability, so backward
// and recomputation draw it again instead of storing it.
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                       int64_t C, int64_t NH, const DropoutSite* drop = nullptr);

// dqkv (B, T, 3*C) written (not accumulated), from dout (B, T, C) and the saved
// out (B, T, C) and lse (B, NH, T).
// drop: the same site as the forward's.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH,
                        const DropoutSite* drop = nullptr);

// --bf16 / --fp16: the same kernels with qkv and out stored in 16 bits
// (qkv is the QKV GEMM's output, out the projection GEMM's input). Tiles are
// widened to fp32 on loading; the scores, the softmax, lse and the
// gradient sums stay fp32, and each out element is rounded once. The
// backward writes dqkv in 16 bits too (the qkv GEMM's backward operand),
// each element rounded once from its fp32 sum.
void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B, int64_t T,
                            int64_t C, int64_t NH, const DropoutSite* drop = nullptr);
void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B, int64_t T,
                            int64_t C, int64_t NH, const DropoutSite* drop = nullptr);
void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                             const bf16_t* out, const float* lse, int64_t B, int64_t T, int64_t C,
                             int64_t NH, const DropoutSite* drop = nullptr);
void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                             const fp16_t* out, const float* lse, int64_t B, int64_t T, int64_t C,
                             int64_t NH, const DropoutSite* drop = nullptr);

// Grouped-query attention with rotary position embedding: the same kernels
// for any heads (attention_heads.h). qkv (B, T, heads.qkv_width()) holds
// [q: NH heads | k: KVH heads | v: KVH heads]; out (B, T, NH * HS), lse
// (B, NH, T), dqkv like qkv. Query head h reads key/value head
// h / (NH / KVH); no repeated k/v is formed. With rope_base > 0, q and k
// are rotated to their positions 0..T-1 as they are loaded into the tiles
// (rope.h), and dq, dk are turned back by the inverse rotation, so dqkv is
// the gradient of the stored (unrotated) qkv. AttentionHeads::mha(C, NH)
// gives the (C, NH) functions above, bit for bit. The backward runs one
// task per (sequence, kv head).
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                       const AttentionHeads& heads, const DropoutSite* drop = nullptr);
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, const AttentionHeads& heads,
                        const DropoutSite* drop = nullptr);
void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B, int64_t T,
                            const AttentionHeads& heads, const DropoutSite* drop = nullptr);
void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B, int64_t T,
                            const AttentionHeads& heads, const DropoutSite* drop = nullptr);
void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                             const bf16_t* out, const float* lse, int64_t B, int64_t T,
                             const AttentionHeads& heads, const DropoutSite* drop = nullptr);
void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                             const fp16_t* out, const float* lse, int64_t B, int64_t T,
                             const AttentionHeads& heads, const DropoutSite* drop = nullptr);

// The Philox draws of the attention-probability dropout mask per sequence
// and query head in one forward or one backward call: the kernels draw a
// whole (row group, key tile) of bits for every tile they visit on and
// under the causal diagonal, not one per kept probability, so the planner
// prices the mask by these draws (model/op_list.cpp) rather than by T^2/2.
int64_t attention_dropout_draws(int64_t T, bool forward);

// One decoding step with a KV cache: q (NH*HS) attends over positions 0..len-1
// of k_cache and v_cache, each (max_T, C) with row t the key/value of position t.
// out (C).
void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                      int64_t len, int64_t C, int64_t NH);
// The same for any heads: q (NH * HS) of position len-1, rotated here under
// RoPE; k_cache and v_cache (max_T, KVH * HS), keys stored already rotated
// to their positions (rope_rows, rope.h); query head h reads kv head
// h / (NH / KVH). out (NH * HS).
void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                      int64_t len, const AttentionHeads& heads);

}  // namespace tessera::cpu
