// BPE encoding and decoding; loading and saving are in tokenizer_io.cpp.
#include "tessera/data/tokenizer.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <queue>

#include "tessera/core/error.h"
#include "tessera/core/rng.h"
#include "tessera/data/byte_unicode.h"
#include "tessera/data/pretokenize.h"

namespace tessera::data {

// ---- EncodeCache ------------------------------------------------------------

namespace {
// A fast hash for short strings: 8 bytes at a time, multiply-xorshift mixed.
inline uint32_t word_hash(std::string_view w) {
  uint64_t h = 0x9E3779B97F4A7C15ull * (w.size() + 1);
  size_t i = 0;
  for (; i + 8 <= w.size(); i += 8) {
    uint64_t c;
    std::memcpy(&c, w.data() + i, 8);
    h = (h ^ c) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  if (i < w.size()) {
    uint64_t c = 0;
    std::memcpy(&c, w.data() + i, w.size() - i);
    h = (h ^ c) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  uint32_t r = uint32_t(h ^ (h >> 32));
  return r ? r : 1;
}
}  // namespace

const int32_t* EncodeCache::find(std::string_view word, size_t* n) const {
  if (word.size() > kMaxKey || table_.empty()) return nullptr;
  const uint32_t h = word_hash(word);
  const size_t mask = table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Entry& e = table_[i];
    if (e.hash == 0) return nullptr;
    if (e.hash == h && e.len == word.size() && std::memcmp(e.key, word.data(), word.size()) == 0) {
      *n = e.n_ids;
      return e.ids;
    }
  }
}

void EncodeCache::insert(std::string_view word, const int32_t* ids, size_t n) {
  if (word.size() > kMaxKey || n > kMaxIds) return;
  if (table_.empty() || 2 * (used_ + 1) > table_.size()) {
    if (table_.size() >= 2 * max_entries_) {
      std::fill(table_.begin(), table_.end(), Entry{});  // full: start over
      used_ = 0;
    } else {
      std::vector<Entry> old = std::move(table_);
      table_.assign(old.empty() ? 4096 : old.size() * 2, Entry{});
      used_ = 0;
      for (const Entry& e : old)
        if (e.hash) insert(std::string_view(e.key, e.len), e.ids, e.n_ids);
    }
  }
  const uint32_t h = word_hash(word);
  const size_t mask = table_.size() - 1;
  size_t i = h & mask;
  while (table_[i].hash != 0) {
    if (table_[i].hash == h && table_[i].len == word.size() && std::memcmp(table_[i].key, word.data(), word.size()) == 0)
      return;  // already there
    i = (i + 1) & mask;
  }
  Entry& e = table_[i];
  e.hash = h;
  e.len = uint8_t(word.size());
  e.n_ids = uint8_t(n);
  std::memcpy(e.key, word.data(), word.size());
  std::memcpy(e.ids, ids, n * sizeof(int32_t));
  ++used_;
}

// ---- index ------------------------------------------------------------------

namespace {

inline uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  }
  void u32(uint32_t v) {
    unsigned char le[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
    bytes(le, 4);
  }
};

}  // namespace

void Tokenizer::build_index() {
  const int32_t V = vocab_size();
  // single bytes
  std::fill(std::begin(byte_id_), std::end(byte_id_), -1);
  for (int32_t id = 0; id < V; ++id)
    if (tokens_[size_t(id)].size() == 1 && byte_id_[uint8_t(tokens_[size_t(id)][0])] < 0)
      byte_id_[uint8_t(tokens_[size_t(id)][0])] = id;
  for (int b = 0; b < 256; ++b) TESSERA_CHECK(byte_id_[b] >= 0, "tokenizer: the vocabulary has no token for byte 0x{:02X}", b);

  // merge results: the token whose bytes are left + right
  std::unordered_map<std::string, int32_t> by_bytes;
  by_bytes.reserve(size_t(V));
  for (int32_t id = 0; id < V; ++id) by_bytes.emplace(tokens_[size_t(id)], id);
  const size_t M = merges_.size();
  merge_result_.assign(M, -1);
  size_t cap = 16;
  while (cap < 2 * M) cap *= 2;
  table_.assign(cap, MergeSlot{kEmpty, 0, 0});
  std::vector<uint8_t> made(size_t(V), 0);
  for (size_t r = 0; r < M; ++r) {
    auto [a, b] = merges_[r];
    TESSERA_CHECK(a >= 0 && a < V && b >= 0 && b < V, "tokenizer: merge {} refers to a token outside the vocabulary", r);
    auto it = by_bytes.find(tokens_[size_t(a)] + tokens_[size_t(b)]);
    TESSERA_CHECK(it != by_bytes.end(), "tokenizer: merge {} ('{}' '{}') makes a token that is not in the vocabulary", r,
                  bytes_to_gpt2(tokens_[size_t(a)]), bytes_to_gpt2(tokens_[size_t(b)]));
    merge_result_[r] = it->second;
    made[size_t(it->second)] = 1;
    uint64_t key = pair_key(a, b);
    size_t i = splitmix64(key) & (cap - 1);
    while (table_[i].key != kEmpty && table_[i].key != key) i = (i + 1) & (cap - 1);
    if (table_[i].key == kEmpty) table_[i] = MergeSlot{key, int32_t(r), it->second};  // first (lowest) rank wins
  }

  // specials: multi-byte tokens no merge produces
  specials_.clear();
  special_flag_.assign(size_t(V), 0);
  eot_id_ = -1;
  specials_have_space_ = false;
  for (int32_t id = 0; id < V; ++id) {
    const std::string& t = tokens_[size_t(id)];
    if (t.size() > 1 && !made[size_t(id)]) {
      specials_.emplace_back(t, id);
      special_flag_[size_t(id)] = 1;
      if (t.find(' ') != std::string::npos) specials_have_space_ = true;
      if (t == kEndOfText) eot_id_ = id;
    }
  }
  // longest first, so a special that contains another wins
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const auto& x, const auto& y) { return x.first.size() > y.first.size(); });

  Fnv f;
  f.bytes("tessera-bpe-1", 13);
  f.u32(uint32_t(V));
  for (const auto& t : tokens_) {
    f.u32(uint32_t(t.size()));
    f.bytes(t.data(), t.size());
  }
  f.u32(uint32_t(M));
  for (auto [a, b] : merges_) {
    f.u32(uint32_t(a));
    f.u32(uint32_t(b));
  }
  hash_ = f.h;
}

Tokenizer Tokenizer::from_merges(const std::vector<std::pair<int32_t, int32_t>>& merges,
                                 const std::vector<std::string>& specials) {
  Tokenizer tok;
  const auto& bu = byte_unicode();
  for (int k = 0; k < 256; ++k) tok.tokens_.emplace_back(1, char(bu.order[size_t(k)]));
  for (auto [a, b] : merges) {
    TESSERA_CHECK(a >= 0 && b >= 0 && size_t(a) < tok.tokens_.size() && size_t(b) < tok.tokens_.size(),
                  "tokenizer: merge ({}, {}) refers to a token not yet made", a, b);
    tok.tokens_.push_back(tok.tokens_[size_t(a)] + tok.tokens_[size_t(b)]);
  }
  for (const auto& s : specials) tok.tokens_.push_back(s);
  tok.merges_ = merges;
  tok.build_index();
  return tok;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_flag_[size_t(id)];
}

const Tokenizer::MergeSlot* Tokenizer::find_merge(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  const size_t mask = table_.size() - 1;
  size_t i = splitmix64(key) & mask;
  while (true) {
    const MergeSlot& s = table_[i];
    if (s.key == key) return &s;
    if (s.key == kEmpty) return nullptr;
    i = (i + 1) & mask;
  }
}

// ---- BPE --------------------------------------------------------------------

// encoder.py's loop: find the lowest-rank adjacent pair, merge every
// occurrence of it left to right, repeat. O(n^2) but n is a word.
void Tokenizer::bpe_small(std::vector<int32_t>& parts) const {
  while (parts.size() >= 2) {
    int32_t best_rank = INT32_MAX, result = -1;
    size_t best = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      const MergeSlot* m = find_merge(parts[k], parts[k + 1]);
      if (m && m->rank < best_rank) {
        best_rank = m->rank;
        result = m->result;
        best = k;
      }
    }
    if (result < 0) break;
    const int32_t a = parts[best], b = parts[best + 1];
    size_t w = best, k = best;
    while (k < parts.size()) {
      if (k + 1 < parts.size() && parts[k] == a && parts[k + 1] == b) {
        parts[w++] = result;
        k += 2;
      } else {
        parts[w++] = parts[k++];
      }
    }
    parts.resize(w);
  }
}

// The same merges for long words (long digit strings, base64, runs of
// symbols) in O(n log n): a heap of (rank, position) over a linked list.
// Equal to bpe_small whenever every pair containing a merged token ranks
// after the merge that made it, which holds for any trained vocabulary.
void Tokenizer::bpe_large(std::vector<int32_t>& parts) const {
  const int n = int(parts.size());
  std::vector<int> prev(parts.size()), next(parts.size());  // (n,) linked list over positions; -1 ends
  for (int i = 0; i < n; ++i) {
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[size_t(i)] < 0) return;
    int32_t a = parts[size_t(i)], b = parts[size_t(next[size_t(i)])];
    if (const MergeSlot* m = find_merge(a, b)) heap.push(Cand{m->rank, i, a, b});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    const int i = c.pos, j = next[size_t(i)];
    if (parts[size_t(i)] != c.left || j < 0 || parts[size_t(j)] != c.right) continue;  // stale
    parts[size_t(i)] = merge_result_[size_t(c.rank)];
    parts[size_t(j)] = -1;
    next[size_t(i)] = next[size_t(j)];
    if (next[size_t(j)] >= 0) prev[size_t(next[size_t(j)])] = i;
    push(prev[size_t(i)]);
    push(i);
  }
  parts.erase(std::remove(parts.begin(), parts.end(), -1), parts.end());
}

void Tokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<int32_t> parts;  // (len(word),) ids being merged
  parts.resize(word.size());
  for (size_t i = 0; i < word.size(); ++i) parts[i] = byte_id_[uint8_t(word[i])];
  if (parts.size() <= 64) bpe_small(parts);
  else bpe_large(parts);
  out.insert(out.end(), parts.begin(), parts.end());
}

// ---- encode / decode ----------------------------------------------------------

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const {
  pretokenize(text, [&](size_t b, size_t e) {
    std::string_view word = text.substr(b, e - b);
    if (word.size() == 1) {  // no merge to try
      out.push_back(byte_id_[uint8_t(word[0])]);
      return;
    }
    size_t n;
    if (const int32_t* ids = cache.find(word, &n)) {
      out.insert(out.end(), ids, ids + n);
      return;
    }
    size_t before = out.size();
    bpe_word(word, out);
    cache.insert(word, out.data() + before, out.size() - before);
  });
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache, bool specials) const {
  if (!specials || specials_.empty()) {
    encode_ordinary(text, out, cache);
    return;
  }
  // Split on the earliest special occurrence, repeatedly; each special's next
  // occurrence is remembered so the text is scanned once per special.
  std::vector<size_t> next(specials_.size(), 0);  // (S,) next occurrence at or after pos
  for (size_t k = 0; k < specials_.size(); ++k) next[k] = text.find(specials_[k].first);
  size_t pos = 0;
  while (true) {
    size_t k_best = specials_.size();
    for (size_t k = 0; k < specials_.size(); ++k) {
      if (next[k] != std::string_view::npos && next[k] < pos) next[k] = text.find(specials_[k].first, pos);
      if (next[k] != std::string_view::npos && (k_best == specials_.size() || next[k] < next[k_best])) k_best = k;
    }
    if (k_best == specials_.size()) break;
    encode_ordinary(text.substr(pos, next[k_best] - pos), out, cache);
    out.push_back(specials_[k_best].second);
    pos = next[k_best] + specials_[k_best].first.size();
  }
  encode_ordinary(text.substr(pos), out, cache);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool specials) const {
  EncodeCache cache;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3);
  encode(text, out, cache, specials);
  return out;
}

size_t find_safe_cut(std::string_view text, size_t from) {
  auto graphic = [](unsigned char c) { return c > 0x20 && c < 0x7F; };
  for (size_t p = std::max<size_t>(from, 1); p + 1 < text.size(); ++p) {
    if (text[p] == ' ' && graphic(uint8_t(text[p - 1])) && graphic(uint8_t(text[p + 1]))) return p;
  }
  return std::string_view::npos;
}

void Tokenizer::encode_parallel(std::string_view text, std::vector<int32_t>& out, std::vector<EncodeCache>& caches,
                                bool specials) const {
  const int threads = omp_get_max_threads();
  if (int(caches.size()) < threads) caches.resize(size_t(threads));
  // Pieces of ~256 KiB: enough to amortise scheduling, small enough to balance.
  constexpr size_t kPiece = size_t(1) << 18;
  std::vector<size_t> cuts{0};  // (pieces + 1,) piece boundaries
  if (!specials_have_space_) {
    while (text.size() - cuts.back() > 2 * kPiece) {
      size_t c = find_safe_cut(text, cuts.back() + kPiece);
      if (c == std::string_view::npos) break;
      cuts.push_back(c);
    }
  }
  cuts.push_back(text.size());
  const int pieces = int(cuts.size()) - 1;
  if (pieces == 1 || threads == 1) {
    encode(text, out, caches[0], specials);
    return;
  }
  std::vector<std::vector<int32_t>> parts(cuts.size() - 1);  // (pieces,) ids of each piece
#pragma omp parallel for schedule(dynamic, 1)
  for (int p = 0; p < pieces; ++p) {
    auto& ids = parts[size_t(p)];
    ids.reserve((cuts[size_t(p) + 1] - cuts[size_t(p)]) / 3);
    encode(text.substr(cuts[size_t(p)], cuts[size_t(p) + 1] - cuts[size_t(p)]), ids, caches[size_t(omp_get_thread_num())],
           specials);
  }
  size_t total = out.size();
  for (const auto& v : parts) total += v.size();
  out.reserve(total);
  for (const auto& v : parts) out.insert(out.end(), v.begin(), v.end());
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    TESSERA_CHECK(id >= 0 && id < vocab_size(), "tokenizer: cannot decode token id {}: the vocabulary has {} tokens", id,
                  vocab_size());
    out += tokens_[size_t(id)];
  }
  return out;
}

}  // namespace tessera::data
