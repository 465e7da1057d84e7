// llm.c's token shards (dev/data/data_common.py write_datafile):
//
//   header: 256 int32, little-endian
//     [0] magic: 20240520 (GPT-2, uint16 ids) or 20240801 (Llama 3, uint32 ids)
//     [1] version: 1 (GPT-2) or 7 (Llama 3)
//     [2] token count
//     [3..255] zero
//   then count ids, uint16 or uint32 as the magic says.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/data/mapped_file.h"
#include "tessera/data/token_source.h"

namespace tessera::data {

inline constexpr int32_t kLlmcMagicGpt2 = 20240520;
inline constexpr int32_t kLlmcMagicLlama3 = 20240801;
inline constexpr size_t kLlmcHeaderBytes = 256 * 4;
inline constexpr uint32_t kLlmcGpt2Vocab = 50257;    // GPT-2's BPE (Radford et al. 2019)
inline constexpr uint32_t kLlmcLlama3Vocab = 128256;  // Llama 3's tiktoken vocabulary

class LlmcShard final : public TokenSource {
 public:
  explicit LlmcShard(const std::string& path);
  std::string describe() const override;
  // The format names its tokenizer: version 1 shards hold GPT-2 ids (50257
  // tokens), version 7 Llama 3 ids (128256), so either is the default
  // vocabulary (--vocab-size overrides it).
  uint32_t vocab_hint() const override {
    return dtype_ == IntType::U16 ? kLlmcGpt2Vocab : kLlmcLlama3Vocab;
  }

 private:
  explicit LlmcShard(MappedFile map);
  void read_raw(int64_t begin, int64_t count, int32_t* out) const override;
  void check_unchanged() const override { map_.check_unchanged(); }
  MappedFile map_;  // (1024,) header bytes then (count,) ids
  IntType dtype_ = IntType::U16;
};

// Writes a GPT-2 (uint16) llm.c shard; for tests and for exporting.
void write_llmc_shard(const std::string& path, const std::vector<int32_t>& tokens);

}  // namespace tessera::data
