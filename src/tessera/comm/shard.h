// Shard arithmetic for buffers split over a group: ZeRO's gradient and
// optimizer shards, reduce_scatter / all_gather blocks. A buffer whose length
// does not divide by the group size is padded at the end, never truncated.
#pragma once
#include <cstddef>

namespace tessera::comm {

struct Shard {
  size_t shard_count;   // elements every rank owns (the padded block size)
  size_t padded_count;  // shard_count * parts >= the real length
  size_t begin;         // this part's first element in the padded buffer
  size_t valid;         // how many of its elements are real (the rest padding)
};

constexpr Shard shard_of(size_t count, int parts, int index) {
  const size_t p = size_t(parts);
  const size_t per = (count + p - 1) / p;
  const size_t begin = per * size_t(index);
  const size_t valid = begin >= count ? 0 : (count - begin < per ? count - begin : per);
  return {per, per * p, begin, valid};
}

}  // namespace tessera::comm
