#include "tessera/data/bpe_train.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <queue>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/data/byte_unicode.h"
#include "tessera/data/pretokenize.h"

namespace tessera::data {

void count_words(std::string_view text, const std::vector<std::string>& specials, WordCounts& counts) {
  size_t pos = 0;
  while (pos <= text.size()) {
    // next special occurrence (earliest, then longest)
    size_t best = std::string_view::npos, best_len = 0;
    for (const auto& s : specials) {
      if (s.empty()) continue;
      size_t f = text.find(s, pos);
      if (f < best || (f == best && f != std::string_view::npos && s.size() > best_len)) {
        best = f;
        best_len = s.size();
      }
    }
    std::string_view piece = text.substr(pos, best == std::string_view::npos ? std::string_view::npos : best - pos);
    pretokenize(piece, [&](size_t b, size_t e) {
      std::string_view w = piece.substr(b, e - b);
      auto it = counts.find(std::string(w));
      if (it == counts.end()) counts.emplace(std::string(w), 1);
      else ++it->second;
    });
    if (best == std::string_view::npos) break;
    pos = best + best_len;
  }
}

namespace {

inline uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
inline int32_t key_left(uint64_t k) { return int32_t(k >> 32); }
inline int32_t key_right(uint64_t k) { return int32_t(k & 0xFFFFFFFFu); }

struct Word {
  std::vector<int32_t> ids;  // (current length,) token ids
  int64_t count;
};

// Max-heap of (count, pair) with lazy deletion: an entry is live only if its
// count still equals pair_count. Ties: smaller (left bytes, right bytes).
struct Entry {
  int64_t count;
  uint64_t pair;
};
struct Worse {
  const std::vector<std::string>* token;  // bytes of each id
  bool operator()(const Entry& x, const Entry& y) const {
    if (x.count != y.count) return x.count < y.count;
    const std::string &xl = (*token)[size_t(key_left(x.pair))], &yl = (*token)[size_t(key_left(y.pair))];
    if (xl != yl) return xl > yl;
    return (*token)[size_t(key_right(x.pair))] > (*token)[size_t(key_right(y.pair))];
  }
};

// Words in a fixed order (sorted bytes) so nothing depends on hash order, as
// byte ids; words of one byte (nothing to merge) left out.
std::vector<Word> initial_words(const WordCounts& counts, const int32_t (&byte_id)[256]) {
  std::vector<const std::pair<const std::string, int64_t>*> sorted;
  sorted.reserve(counts.size());
  for (const auto& kv : counts) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](auto* x, auto* y) { return x->first < y->first; });
  std::vector<Word> words;  // (W,)
  words.reserve(sorted.size());
  for (auto* kv : sorted) {
    if (kv->first.size() < 2) continue;  // nothing to merge
    Word w{{}, kv->second};
    for (unsigned char c : kv->first) w.ids.push_back(byte_id[c]);
    words.push_back(std::move(w));
  }
  return words;
}

// The merge loop's state: the vocabulary so far, the words as current ids,
// the pair counts, which words (may) hold each pair, and the heap.
class BpeTrainer {
 public:
  explicit BpeTrainer(const WordCounts& counts) {
    const auto& bu = byte_unicode();
    int32_t byte_id[256];
    for (int k = 0; k < 256; ++k) byte_id[bu.order[size_t(k)]] = k;
    for (int k = 0; k < 256; ++k) token_.emplace_back(1, char(bu.order[size_t(k)]));
    words_ = initial_words(counts, byte_id);
    for (int32_t wi = 0; wi < int32_t(words_.size()); ++wi) {
      const auto& ids = words_[size_t(wi)].ids;
      for (size_t k = 0; k + 1 < ids.size(); ++k) {
        uint64_t p = key(ids[k], ids[k + 1]);
        pair_count_[p] += words_[size_t(wi)].count;
        auto& w = where_[p];
        if (w.empty() || w.back() != wi) w.push_back(wi);
      }
    }
    for (const auto& [p, c] : pair_count_) heap_.push(Entry{c, p});
  }
  BpeTrainer(const BpeTrainer&) = delete;  // the heap points at token_
  BpeTrainer& operator=(const BpeTrainer&) = delete;

  // The most frequent live pair, or none when none is left or it occurs
  // fewer than min_count times.
  std::optional<uint64_t> next_pair(int64_t min_count) {
    while (!heap_.empty()) {
      Entry top = heap_.top();
      heap_.pop();
      auto pc = pair_count_.find(top.pair);
      if (pc == pair_count_.end() || pc->second != top.count) continue;  // stale
      if (top.count < min_count) return std::nullopt;
      return top.pair;
    }
    return std::nullopt;
  }

  // Merge `pair` into a new token everywhere; returns its (left, right).
  std::pair<int32_t, int32_t> merge(uint64_t pair) {
    const int32_t a = key_left(pair), b = key_right(pair);
    const int32_t x = int32_t(token_.size());
    token_.push_back(token_[size_t(a)] + token_[size_t(b)]);
    delta_.clear();
    std::vector<int32_t> holders = std::move(where_[pair]);
    where_.erase(pair);
    for (int32_t wi : holders) rewrite_word(wi, a, b, x);
    for (const auto& [p, d] : delta_) {
      if (d == 0) continue;
      int64_t& c = pair_count_[p];
      c += d;
      if (c <= 0) pair_count_.erase(p);
      else heap_.push(Entry{c, p});
    }
    pair_count_.erase(pair);
    return {a, b};
  }

 private:
  // Rewrite word wi if it holds (a, b) as x; the pair counts change by
  // count * (pairs after - pairs before).
  void rewrite_word(int32_t wi, int32_t a, int32_t b, int32_t x) {
    Word& w = words_[size_t(wi)];
    auto& ids = w.ids;
    bool has = false;
    for (size_t k = 0; k + 1 < ids.size(); ++k)
      if (ids[k] == a && ids[k + 1] == b) {
        has = true;
        break;
      }
    if (!has) return;  // a stale holder
    for (size_t k = 0; k + 1 < ids.size(); ++k) delta_[key(ids[k], ids[k + 1])] -= w.count;
    merged_.clear();
    for (size_t k = 0; k < ids.size();) {
      if (k + 1 < ids.size() && ids[k] == a && ids[k + 1] == b) {
        merged_.push_back(x);
        k += 2;
      } else {
        merged_.push_back(ids[k++]);
      }
    }
    ids.swap(merged_);
    for (size_t k = 0; k + 1 < ids.size(); ++k) {
      uint64_t p = key(ids[k], ids[k + 1]);
      delta_[p] += w.count;
      if (ids[k] == x || ids[k + 1] == x) {  // a pair that did not exist before in this word
        auto& wl = where_[p];
        if (wl.empty() || wl.back() != wi) wl.push_back(wi);
      }
    }
  }

  std::vector<std::string> token_;  // (V so far,) bytes of each id, for tie-breaking
  std::vector<Word> words_;         // (W,)
  std::unordered_map<uint64_t, int64_t> pair_count_;            // pair -> total count
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;    // pair -> words that (may) hold it
  std::priority_queue<Entry, std::vector<Entry>, Worse> heap_{Worse{&token_}};
  std::unordered_map<uint64_t, int64_t> delta_;  // pair count changes from one merge
  std::vector<int32_t> merged_;                  // (len,) scratch for a rewritten word
};

}  // namespace

Tokenizer train_bpe(const WordCounts& counts, const BpeTrainOptions& opts) {
  const int32_t n_special = int32_t(opts.specials.size());
  TESSERA_CHECK(opts.vocab_size >= 256 + n_special, "tokenize train: --vocab-size {} is below the minimum {} (256 bytes + {} special)",
                opts.vocab_size, 256 + n_special, n_special);
  const int32_t want = opts.vocab_size - 256 - n_special;  // merges to learn

  BpeTrainer trainer(counts);
  std::vector<std::pair<int32_t, int32_t>> merges;
  while (int32_t(merges.size()) < want) {
    const std::optional<uint64_t> pair = trainer.next_pair(opts.min_pair_count);
    if (!pair) break;
    merges.push_back(trainer.merge(*pair));
    if (opts.progress && opts.progress_every > 0 && int32_t(merges.size()) % opts.progress_every == 0)
      opts.progress(int32_t(merges.size()), want);
  }
  if (opts.progress) opts.progress(int32_t(merges.size()), want);
  return Tokenizer::from_merges(merges, opts.specials);
}

Tokenizer train_bpe_files(const std::vector<std::string>& files, const BpeTrainOptions& opts) {
  TESSERA_CHECK(!files.empty(), "tokenize train: no input files");
  WordCounts counts;
  for (const auto& path : files) {
    std::ifstream f(path, std::ios::binary);
    TESSERA_CHECK(f.good(), "tokenize train: cannot open {}", path);
    std::ostringstream ss;
    ss << f.rdbuf();
    count_words(ss.str(), opts.specials, counts);
  }
  return train_bpe(counts, opts);
}

}  // namespace tessera::data
