#include "tessera/model/kv_cache.h"

namespace tessera {

void KVCache::init(int64_t layers_, int64_t max_T_, int64_t C_) {
  layers = layers_;
  max_T = max_T_;
  C = C_;
  len = 0;
  k.allocate(layers * max_T * C);
  v.allocate(layers * max_T * C);
}

}  // namespace tessera
