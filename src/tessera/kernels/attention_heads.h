// The heads of one attention call: how many query heads, how many key/value
// heads they share (grouped-query attention), their size, and the rotary
// base (RoPE applied to q and k inside the kernel). Plain data every
// backend reads, beside DropoutSite.
//
// qkv rows hold [q: q_heads | k: kv_heads | v: kv_heads] heads of head_size
// each; query head h reads key/value head h / (q_heads / kv_heads). Under
// tensor parallelism the counts are the rank's local heads, in the same
// layout. GPT-2's multi-head attention is kv_heads = q_heads, rope_base 0.
#pragma once
#include <cstdint>

namespace tessera {

struct AttentionHeads {
  int64_t q_heads = 0;     // NH
  int64_t kv_heads = 0;    // KVH: divides NH; NH for plain multi-head attention
  int64_t head_size = 0;   // HS (even under RoPE)
  float rope_base = 0.0f;  // --rotary-base; 0: no rotary position embedding

  // GPT-2's heads: NH heads of C / NH, no rotation (the kernel checks that
  // C divides by NH).
  static AttentionHeads mha(int64_t C, int64_t NH) {
    return {NH, NH, NH > 0 ? C / NH : 0, 0.0f};
  }
  bool rope() const { return rope_base > 0.0f; }
  int64_t group() const { return q_heads / kv_heads; }  // query heads per kv head
  int64_t q_width() const { return q_heads * head_size; }  // out's row width (C)
  int64_t kv_width() const { return kv_heads * head_size; }
  int64_t qkv_width() const { return (q_heads + 2 * kv_heads) * head_size; }
};

}  // namespace tessera
