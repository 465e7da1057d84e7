// open_token_source: tells the format from the file's first bytes, so the
// trainer takes any of the three with one --data flag.
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"
#include "tessera/data/llmc_shard.h"
#include "tessera/data/megatron_dataset.h"
#include "tessera/data/token_file.h"

namespace tessera::data {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

void apply(TokenSource& src, const OpenOptions& opts) {
  // The hash first: "made by another tokenizer" is the more useful message.
  if (opts.tokenizer_hash) check_tokenizer_hash(src, opts.tokenizer_hash, "the tokenizer in use");
  if (opts.vocab_size) {
    // A file declaring a bigger vocabulary than ours cannot be right even if
    // the ids actually used happen to fit.
    TESSERA_CHECK(src.vocab_hint() == 0 || src.vocab_hint() <= opts.vocab_size,
                  "{}: the file's vocabulary has {} tokens but the one in use has {}", src.path(), src.vocab_hint(),
                  opts.vocab_size);
    src.set_vocab_limit(opts.vocab_size);
  }
}

}  // namespace

std::unique_ptr<TokenSource> open_token_source(const std::string& path, const OpenOptions& opts) {
  std::unique_ptr<TokenSource> src;
  // Megatron: PREFIX, PREFIX.bin or PREFIX.idx with both files present.
  std::string prefix = path;
  if (ends_with(path, ".bin") || ends_with(path, ".idx")) prefix = path.substr(0, path.size() - 4);
  std::error_code exists_ec;
  const bool megatron = fs::exists(prefix + ".idx", exists_ec) && fs::exists(prefix + ".bin", exists_ec);
  if (megatron && (path == prefix || ends_with(path, ".idx"))) {
    src = std::make_unique<MegatronDataset>(prefix);
  } else {
    std::error_code ec;
    TESSERA_CHECK(fs::exists(path, ec), "cannot open token data {}{}", path, megatron ? "" : " (no such file)");
    // Not an ifstream: opening a named pipe that way blocks forever.
    const int fd = open_regular_file(path, "token data");
    char head[8] = {};
    const ssize_t got = ::pread(fd, head, 8, 0);
    ::close(fd);
    int32_t magic;
    std::memcpy(&magic, head, 4);
    if (got == 8 && std::memcmp(head, kTokenFileMagic, 8) == 0) {
      src = std::make_unique<TokenFile>(path);
    } else if (got >= 4 && (magic == kLlmcMagicGpt2 || magic == kLlmcMagicLlama3)) {
      src = std::make_unique<LlmcShard>(path);
    } else if (megatron) {
      src = std::make_unique<MegatronDataset>(prefix);
    } else {
      fail("{}: unknown token file format (not a tessera token file, an llm.c shard, or a Megatron .bin with its .idx)", path);
    }
  }
  apply(*src, opts);
  return src;
}

std::unique_ptr<TokenSource> open_token_sources(const std::vector<std::string>& paths, const OpenOptions& opts) {
  TESSERA_CHECK(!paths.empty(), "no token data files given");
  if (paths.size() == 1) return open_token_source(paths[0], opts);
  std::vector<std::unique_ptr<TokenSource>> parts;
  for (const auto& p : paths) parts.push_back(open_token_source(p, opts));
  auto src = std::make_unique<ConcatTokenSource>(std::move(parts));
  if (opts.vocab_size) src->set_vocab_limit(opts.vocab_size);
  return src;
}

}  // namespace tessera::data
