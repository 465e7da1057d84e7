// Causal attention of one rank's queries against one key/value block at a
// time, by global positions: the kernel of ring (context-parallel)
// attention. A context-parallel rank holds T/cp rows of each sequence
// (kernels/context_chunks.h); its queries meet the whole sequence's keys one
// block per ring step, and the partial results are merged in the flash
// kernels' online-softmax form: each block yields its rows' log-sum-exp and
// normalised output, and
//   lse' = log(exp(lse) + exp(lse_blk)),
//   out' = out * exp(lse - lse') + out_blk * exp(lse_blk - lse').
// After every block has been seen, out and lse equal the full attention's
// rows (cpu/attention.h) at those positions.
//
// Everything is keyed by global position: the causal mask (key position <=
// query position), RoPE (q and k rotated to their own positions) and the
// probability dropout (the element (head, query, key) of the whole (T, T)
// matrix, kernels/cpu/dropout.h), so any split of the sequence computes
// the same numbers as one process. fp32 only; written for clarity (one
// query row at a time), not yet tiled like attention.cpp.
//
// Shapes (heads: attention_heads.h, NH query heads, KVH key/value heads of HS):
//   qkv   (B, Tq, (NH + 2 KVH) HS)  the rank's own rows, stored (unrotated)
//   kv    (B, Tk, 2 KVH HS)         a key/value block [k | v] (what travels)
//   q_pos (Tq), k_pos (Tk)          global positions of the rows
//   out   (B, Tq, NH HS), lse (B, NH, Tq)
#pragma once
#include <cstdint>

#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/dropout_site.h"

namespace tessera::cpu {

// kv (B, T, 2 KVH HS) = the k and v columns of qkv (B, T, W): the block a
// rank sends first.
void ring_kv_pack(float* kv, const float* qkv, int64_t B, int64_t T, const AttentionHeads& heads);

// Before the first block: out = 0, lse = -inf (no key seen yet).
void ring_attention_forward_init(float* out, float* lse, int64_t B, int64_t Tq,
                                 const AttentionHeads& heads);

// Merges one block's attention into (out, lse). T: the whole sequence's
// length (the dropout element index and the RoPE table). Rows that see no
// key of the block are left as they are.
void ring_attention_forward_block(float* out, float* lse, const float* qkv, const int64_t* q_pos,
                                  int64_t Tq, const float* kv, const int64_t* k_pos, int64_t Tk,
                                  int64_t B, int64_t T, const AttentionHeads& heads,
                                  const DropoutSite* drop);

// D (B, NH, Tq) = rowsum(dout * out) per head: the softmax gradient's
// correction term, formed once before the backward ring. dout, out (B, Tq, NH HS).
void ring_attention_backward_init(float* D, const float* dout, const float* out, int64_t B,
                                  int64_t Tq, const AttentionHeads& heads);

// One block's share of the gradients, accumulated: dq (B, Tq, NH HS) += the
// gradient of the stored q rows, dkv (B, Tk, 2 KVH HS) += the gradient of
// the block's stored [k | v] (travelling with the block back to its owner).
// out and lse: the finished forward's; D from ring_attention_backward_init.
void ring_attention_backward_block(float* dq, float* dkv, const float* dout, const float* qkv,
                                   const float* lse, const float* D, const int64_t* q_pos,
                                   int64_t Tq, const float* kv, const int64_t* k_pos, int64_t Tk,
                                   int64_t B, int64_t T, const AttentionHeads& heads,
                                   const DropoutSite* drop);

}  // namespace tessera::cpu
