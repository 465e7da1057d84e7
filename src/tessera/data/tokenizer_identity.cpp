#include "tessera/data/tokenizer_identity.h"

#include <filesystem>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/data/tokenizer.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

std::string hash_text(uint64_t h) {
  return h == kBytesTokenizerHash ? "byte-level text" : fmt::format("tokenizer {:016x}", h);
}

}  // namespace

TokenizerId same_tokenizer(const std::vector<TokenizerId>& ids) {
  const TokenizerId* first = nullptr;  // the first known hash: every other is compared with it
  for (const TokenizerId& id : ids) {
    if (id.hash == 0) continue;
    if (!first) {
      first = &id;
      continue;
    }
    TESSERA_CHECK(id.hash == first->hash,
                  "tokenizer mismatch: {} has {} but {} has {} (a token id means different text "
                  "under each; use one tokenizer for both)",
                  id.name, hash_text(id.hash), first->name, hash_text(first->hash));
  }
  return first ? *first : TokenizerId{};
}

uint64_t tokenizer_spec_hash(const std::string& spec) {
  if (spec == "bytes") return kBytesTokenizerHash;
  std::error_code ec;
  if (spec.empty() || !fs::is_regular_file(fs::path(spec) / "vocab.json", ec) ||
      !fs::is_regular_file(fs::path(spec) / "merges.txt", ec))
    return 0;
  return Tokenizer::load(spec).hash();
}

TokenizerId model_tokenizer(std::string name, const std::string& spec, uint64_t recorded_hash) {
  return {std::move(name), recorded_hash ? recorded_hash : tokenizer_spec_hash(spec)};
}

}  // namespace tessera::data
