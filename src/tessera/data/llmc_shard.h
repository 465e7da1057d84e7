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

class LlmcShard final : public TokenSource {
 public:
  explicit LlmcShard(const std::string& path);
  std::string describe() const override;
  // GPT-2 shards hold GPT-2 ids; Llama 3 shards have no vocabulary to check against.
  uint32_t vocab_hint() const override { return 0; }

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
