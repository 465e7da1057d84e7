// Writing a Hugging Face checkpoint's weights as save_pretrained does:
// model.safetensors when they fit in max_shard_size, else shards named
// model-00001-of-0000N.safetensors and model.safetensors.index.json
// (hf_index.h) mapping each tensor to its shard.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ckpt/safetensors.h"

namespace tessera::ckpt {

// A size as transformers' max_shard_size takes it: bytes ("1000000"), or an
// integer with KB, MB, GB (powers of 1000) or KiB, MiB, GiB (of 1024), any
// case ("5GB" is 5,000,000,000 bytes). Refuses anything else, and zero,
// naming `flag`. (transformers reads a lowercase "b" as bits; refused here
// rather than guessed.)
uint64_t parse_shard_size(const std::string& text, const char* flag);

// The file names of n shards: model-00001-of-0000n.safetensors, ...
std::vector<std::string> shard_names(size_t n);

// Writes w's tensors into out_dir: one model.safetensors when max_bytes is 0
// or they fit, else shards of at most max_bytes each (one larger tensor
// alone in its own) and the index. Then removes the weights an earlier
// export left there in the other layout, which a loader could prefer (a
// stale model.safetensors beside new shards is what transformers would
// read). Returns the files written, the index last.
std::vector<std::string> write_safetensors_shards(const SafetensorsWriter& w,
                                                  const std::string& out_dir, uint64_t max_bytes);

}  // namespace tessera::ckpt
