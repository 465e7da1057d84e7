#include "tessera/model/kv_cache.h"

namespace tessera {

void KVCache::init(int64_t layers_, int64_t max_T_, int64_t width_) {
  layers = layers_;
  max_T = max_T_;
  width = width_;
  len = 0;
  k.allocate(layers * max_T * width);
  v.allocate(layers * max_T * width);
}

}  // namespace tessera
