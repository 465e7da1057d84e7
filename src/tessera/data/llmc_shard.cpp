#include "tessera/data/llmc_shard.h"

#include <cstring>
#include <fstream>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

struct LlmcHeader {
  IntType dtype;
  int64_t count;
};

LlmcHeader parse_llmc(const MappedFile& m) {
  const std::string& path = m.path();
  TESSERA_CHECK(m.size() >= kLlmcHeaderBytes, "{}: truncated llm.c shard: {} bytes, shorter than the 1024-byte header", path,
                m.size());
  int32_t h[3];
  std::memcpy(h, m.data(), sizeof h);
  IntType dtype;
  if (h[0] == kLlmcMagicGpt2) {
    TESSERA_CHECK(h[1] == 1, "{}: llm.c GPT-2 shard version {} is not supported (expected 1)", path, h[1]);
    dtype = IntType::U16;
  } else if (h[0] == kLlmcMagicLlama3) {
    TESSERA_CHECK(h[1] == 7, "{}: llm.c Llama 3 shard version {} is not supported (expected 7)", path, h[1]);
    dtype = IntType::U32;
  } else {
    fail("{}: not an llm.c shard (bad magic {}, expected {} or {})", path, h[0], kLlmcMagicGpt2, kLlmcMagicLlama3);
  }
  TESSERA_CHECK(h[2] >= 0, "{}: negative token count {} in the header", path, h[2]);
  const uint64_t want = kLlmcHeaderBytes + uint64_t(h[2]) * uint64_t(int_type_size(dtype));
  TESSERA_CHECK(m.size() >= want, "{}: truncated llm.c shard: the header promises {} tokens ({} bytes) but the file has {} bytes",
                path, h[2], want, m.size());
  return {dtype, h[2]};
}

}  // namespace

LlmcShard::LlmcShard(const std::string& path) : LlmcShard(MappedFile(path)) {}

LlmcShard::LlmcShard(MappedFile map) : TokenSource(map.path(), parse_llmc(map).count), map_(std::move(map)) {
  dtype_ = parse_llmc(map_).dtype;
}

std::string LlmcShard::describe() const {
  return fmt::format("llm.c shard {}: {} tokens, {}", path(), size(), int_type_name(dtype_));
}

void LlmcShard::read_raw(int64_t begin, int64_t count, int32_t* out) const {
  widen_tokens(map_.data() + kLlmcHeaderBytes + size_t(begin) * size_t(int_type_size(dtype_)), dtype_, count, out);
}

void write_llmc_shard(const std::string& path, const std::vector<int32_t>& tokens) {
  TESSERA_CHECK(tokens.size() < (size_t(1) << 31), "{}: too many tokens for an llm.c shard", path);
  std::vector<int32_t> header(256, 0);  // (256,)
  header[0] = kLlmcMagicGpt2;
  header[1] = 1;
  header[2] = int32_t(tokens.size());
  std::vector<uint16_t> ids(tokens.size());  // (count,)
  for (size_t i = 0; i < tokens.size(); ++i) {
    TESSERA_CHECK(tokens[i] >= 0 && tokens[i] < 65536, "{}: token id {} does not fit an llm.c uint16 shard", path, tokens[i]);
    ids[i] = uint16_t(tokens[i]);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  TESSERA_CHECK(f.good(), "cannot write {}", path);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 2));
  TESSERA_CHECK(f.good(), "error writing {}", path);
}

}  // namespace tessera::data
