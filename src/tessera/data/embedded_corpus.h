// The embedded default corpus: the English fortunes of Debian's `fortunes`
// package, split into documents at their "%" separators, tokenized with a
// byte-level BPE vocabulary learned from the same text, and cached so only
// the first run pays for it (well under a second).
#pragma once
#include <cstdint>
#include <string>

namespace tessera::data {

inline constexpr int32_t kEmbeddedVocabSize = 4096;

struct EmbeddedCorpus {
  std::string tokenizer_dir;  // vocab.json + merges.txt
  std::string token_file;     // tessera token file of the whole corpus
  bool built_now = false;     // false: reused from the cache
};

// Default cache: $XDG_CACHE_HOME/tessera or ~/.cache/tessera.
std::string default_cache_dir();

// Builds the corpus under cache_dir/corpus/fortunes-bpe4096 unless a
// complete, matching copy is already there. Throws naming the directory when
// the fortunes text is missing.
EmbeddedCorpus ensure_embedded_corpus(const std::string& cache_dir);

}  // namespace tessera::data
