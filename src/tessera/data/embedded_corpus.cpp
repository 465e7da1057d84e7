#include "tessera/data/embedded_corpus.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/data/bpe_train.h"
#include "tessera/data/fortunes_corpus.h"
#include "tessera/data/token_file.h"
#include "tessera/data/tokenizer.h"

namespace tessera::data {

namespace fs = std::filesystem;

std::string default_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/tessera";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/tessera";
}

// Fortune files hold entries separated by lines of a single "%".
static std::vector<std::string> split_documents(const std::string& text) {
  std::vector<std::string> docs;
  std::string cur;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string_view line(text.data() + pos, end - pos);
    if (line == "%\n" || line == "%") {
      if (!cur.empty()) docs.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(line);
    }
    pos = end;
  }
  if (!cur.empty()) docs.push_back(std::move(cur));
  return docs;
}

static bool cached_copy_is_complete(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "vocab.json", ec) || !fs::exists(dir / "merges.txt", ec) ||
      !fs::exists(dir / "fortunes.tok", ec))
    return false;
  try {  // a stale or damaged cache is rebuilt, not trusted
    Tokenizer tok = Tokenizer::load(dir.string());
    TokenFile file((dir / "fortunes.tok").string());
    return file.tokenizer_hash() == tok.hash() && file.size() > 0;
  } catch (const Error&) {
    return false;
  }
}

EmbeddedCorpus ensure_embedded_corpus(const std::string& cache_dir) {
  const fs::path dir = fs::path(cache_dir) / "corpus" / fmt::format("fortunes-bpe{}", kEmbeddedVocabSize);
  EmbeddedCorpus out{dir.string(), (dir / "fortunes.tok").string(), false};
  if (cached_copy_is_complete(dir)) return out;

  const std::string text = read_fortunes();
  const std::vector<std::string> docs = split_documents(text);
  // Build in a private directory and rename it into place, so a concurrent
  // or interrupted first run never leaves a half-written cache behind.
  const fs::path tmp = dir.string() + fmt::format(".tmp-{}", getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const fs::path text_file = tmp / "fortunes.txt";
  {
    std::FILE* f = std::fopen(text_file.c_str(), "wb");
    TESSERA_CHECK(f, "cannot write {}", text_file.string());
    for (const auto& d : docs) std::fwrite(d.data(), 1, d.size(), f);
    std::fclose(f);
  }
  BpeTrainOptions opts;
  opts.vocab_size = kEmbeddedVocabSize;
  Tokenizer tok = train_bpe_files({text_file.string()}, opts);
  fs::remove(text_file);
  tok.save(tmp.string());
  TokenFileWriter writer((tmp / "fortunes.tok").string(), uint32_t(tok.vocab_size()), tok.hash(),
                         tok.eot_id());
  std::vector<EncodeCache> caches;
  std::vector<int32_t> ids;
  const int32_t eot = tok.eot_id();
  for (const auto& d : docs) {
    ids.clear();
    ids.push_back(eot);  // every document starts after an end-of-text, as GPT-2's data
    std::vector<int32_t> body;
    tok.encode_parallel(d, body, caches, /*specials=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
    writer.append(ids);
    writer.end_document();
  }
  writer.close();
  std::error_code ec;
  fs::create_directories(dir.parent_path());
  // Never remove a complete copy: the ranks of one job all build at once on
  // a fresh cache, and one that removed the winner's copy to rename its own
  // would leave the others, already reading, without the file.
  fs::rename(tmp, dir, ec);  // succeeds only where dir is missing or empty
  if (ec && !cached_copy_is_complete(dir)) {
    // What is there is stale (an older corpus or tokenizer): replace it.
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir, ec);
    if (ec && !cached_copy_is_complete(dir))  // another process may have won the race
      fail("cannot move the corpus cache into {}: {}", dir.string(), ec.message());
  }
  const bool ours = !fs::exists(tmp);
  fs::remove_all(tmp, ec);
  out.built_now = ours;
  return out;
}

}  // namespace tessera::data
