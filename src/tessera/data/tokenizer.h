// Byte-level BPE tokenizer as GPT-2 defines it: GPT-2's pre-tokenization
// (pretokenize.h), each pre-token's bytes start as single-byte tokens and the
// merges are applied by rank (lowest first, every occurrence left to right,
// as encoder.py's bpe() does). Special tokens (<|endoftext|>) are whole
// tokens that are never produced by merges.
//
// Loading Hugging Face / OpenAI vocab.json + merges.txt gives GPT-2's ids.
// A Tokenizer is immutable after construction; encode() is const and
// thread-safe, with the word cache owned by the caller (EncodeCache).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::data {

inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// Memo of word bytes -> token ids, one per thread. Words repeat (Zipf), so
// most pre-tokens are one lookup instead of a BPE run. An open-addressing
// table of one cache line per word: the key (words up to 24 bytes) and the
// ids (up to 8) sit inline, so a hit costs a single memory access. Longer
// words are not cached (rare, and BPE on them is cheap relative to their
// length). When the table reaches its cap it is cleared, not evicted.
class EncodeCache {
 public:
  static constexpr size_t kMaxKey = 24, kMaxIds = 8;
  explicit EncodeCache(size_t max_entries = size_t(1) << 18) : max_entries_(max_entries) {}
  // ids of word, or nullptr (sets *n)
  const int32_t* find(std::string_view word, size_t* n) const;
  void insert(std::string_view word, const int32_t* ids, size_t n);
  size_t size() const { return used_; }

 private:
  struct alignas(64) Entry {
    uint32_t hash;  // 0 = empty (real hashes are forced nonzero)
    uint8_t len, n_ids;
    char key[kMaxKey];
    int32_t ids[kMaxIds];
  };
  static_assert(sizeof(Entry) == 64);
  std::vector<Entry> table_;  // (power of 2,) at most half full
  size_t used_ = 0, max_entries_;
};

class Tokenizer {
 public:
  // Merges are (left id, right id) in rank order; merge r creates token
  // 256 + r. Ids 0..255 are the single bytes in GPT-2's order, specials
  // follow the merges. This is the layout `train_bpe` produces and GPT-2 has.
  static Tokenizer from_merges(const std::vector<std::pair<int32_t, int32_t>>& merges,
                               const std::vector<std::string>& specials);
  // A directory with vocab.json + merges.txt, or the two files.
  static Tokenizer load(const std::string& dir);
  static Tokenizer load(const std::string& vocab_json, const std::string& merges_txt);
  // Writes dir/vocab.json and dir/merges.txt (creating dir).
  void save(const std::string& dir) const;

  int32_t vocab_size() const { return int32_t(tokens_.size()); }
  int32_t num_merges() const { return int32_t(merges_.size()); }
  // id of <|endoftext|>, or -1 if the vocabulary has none
  int32_t eot_id() const { return eot_id_; }
  // 64-bit FNV-1a over every token's bytes (by id) and every merge (by rank):
  // equal iff the two tokenizers encode identically.
  uint64_t hash() const { return hash_; }
  const std::string& token_bytes(int32_t id) const { return tokens_.at(size_t(id)); }
  // (left, right) ids of merge `rank`
  std::pair<int32_t, int32_t> merge(int32_t rank) const { return merges_.at(size_t(rank)); }
  int32_t byte_id(uint8_t b) const { return byte_id_[b]; }
  bool is_special(int32_t id) const;

  // Appends the ids of text to out. With specials, occurrences of a special
  // token's text become that token (as Hugging Face does); without, they are
  // ordinary text.
  void encode(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache,
              bool specials = true) const;
  std::vector<int32_t> encode(std::string_view text, bool specials = true) const;
  // Same ids as encode(), computed by OpenMP threads over pieces of text cut
  // where pre-tokenization is known to split anyway. caches: one per thread,
  // kept across calls (resized to the thread count).
  void encode_parallel(std::string_view text, std::vector<int32_t>& out,
                       std::vector<EncodeCache>& caches, bool specials = true) const;
  // Concatenated bytes of the tokens; throws on an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

  // The ids of one pre-token (no cache).
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  Tokenizer() = default;  // only via from_merges/load: an empty tokenizer cannot encode

  struct MergeSlot {
    uint64_t key;    // (left << 32) | right, kEmpty if unused
    int32_t rank;
    int32_t result;  // id of the merged token
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);

  void build_index();  // merge table, byte ids, specials, hash from tokens_/merges_
  const MergeSlot* find_merge(int32_t a, int32_t b) const;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out, EncodeCache& cache) const;
  void bpe_small(std::vector<int32_t>& parts) const;
  void bpe_large(std::vector<int32_t>& parts) const;

  std::vector<std::string> tokens_;                     // (V,) raw bytes of each token
  std::vector<std::pair<int32_t, int32_t>> merges_;     // (M,) merge pairs by rank
  std::vector<int32_t> merge_result_;                   // (M,) id made by each merge
  std::vector<MergeSlot> table_;                        // (power of 2 >= 2M,) open addressing
  std::vector<std::pair<std::string, int32_t>> specials_;  // text, id
  std::vector<uint8_t> special_flag_;                   // (V,) 1 for special tokens
  int32_t byte_id_[256] = {};                            // id of each single byte
  int32_t eot_id_ = -1;
  uint64_t hash_ = 0;
  bool specials_have_space_ = false;  // disables parallel cuts (a cut could split one)

};

// Offsets where text can be cut so that encoding each piece separately gives
// the same ids as encoding the whole: a ' ' between two printable ASCII
// non-space bytes (pre-tokenization always starts a piece at such a space and
// never looks back past it). Returns the first such offset >= from, or npos.
size_t find_safe_cut(std::string_view text, size_t from);

}  // namespace tessera::data
