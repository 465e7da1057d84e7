// Learning BPE merges from text, the GPT-2 way: pre-tokenize, count distinct
// words, then repeatedly merge the most frequent adjacent pair. Pair counts
// are updated incrementally (only the words holding the merged pair are
// touched), so a few MB of text trains in seconds.
//
// Ties between pairs of equal count go to the pair whose (left bytes, right
// bytes) is lexicographically smallest, so training is deterministic and its
// result can be worked out by hand.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/data/tokenizer.h"

namespace tessera::data {

struct BpeTrainOptions {
  int32_t vocab_size = 0;                                  // including the 256 bytes and the specials
  std::vector<std::string> specials{std::string(kEndOfText)};  // appended after the merges
  int64_t min_pair_count = 2;                              // stop before merging a rarer pair
  // Called every `progress_every` merges with (merges done, merges wanted).
  std::function<void(int32_t, int32_t)> progress;
  int32_t progress_every = 1000;
};

// word bytes -> occurrences
using WordCounts = std::unordered_map<std::string, int64_t>;

// Adds the pre-tokens of text to counts. Occurrences of the specials are
// skipped (they are whole tokens, never merged).
void count_words(std::string_view text, const std::vector<std::string>& specials, WordCounts& counts);

// Learns merges from counts. The result may have fewer tokens than asked
// for when no pair occurs min_pair_count times.
Tokenizer train_bpe(const WordCounts& counts, const BpeTrainOptions& opts);

// Reads and counts the files, then trains.
Tokenizer train_bpe_files(const std::vector<std::string>& files, const BpeTrainOptions& opts);

}  // namespace tessera::data
