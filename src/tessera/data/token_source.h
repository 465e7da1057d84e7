// TokenSource: a read-only sequence of token ids, whatever file it lives in.
// The trainer draws windows of T+1 tokens with read(); it never needs to know
// the format. Readers: TokenFile (tessera's own, token_file.h), Megatron-LM
// indexed datasets (megatron_dataset.h), llm.c shards (llmc_shard.h), and
// ConcatTokenSource to join several (e.g. a directory of llm.c shards).
//
// Every read is bounds-checked and, once a vocabulary size is known, every id
// is checked against it, so a file made with another tokenizer fails with a
// message naming the file and position instead of indexing out of an
// embedding table.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;

  // Number of tokens.
  int64_t size() const { return size_; }
  // Copies tokens [begin, begin + count) into out (count,) as int32. Throws
  // tessera::Error (naming the file) for a range outside [0, size()) or an
  // id >= the vocabulary limit.
  void read(int64_t begin, int64_t count, int32_t* out) const;
  std::vector<int32_t> read(int64_t begin, int64_t count) const;

  // The vocabulary size the file declares, or 0 when the format records none
  // (Megatron, llm.c). Used as the default limit for the id check.
  virtual uint32_t vocab_hint() const { return 0; }
  // Hash of the tokenizer that wrote the file (Tokenizer::hash()), or 0 when
  // the format records none.
  virtual uint64_t tokenizer_hash() const { return 0; }
  // One line for logs: format, path, token count, dtype.
  virtual std::string describe() const = 0;
  const std::string& path() const { return path_; }

  // Every id read must be < vocab_size (0: no check). Readers start with
  // vocab_hint(); the trainer sets its model's vocabulary.
  void set_vocab_limit(uint32_t vocab_size) { vocab_limit_ = vocab_size; }
  uint32_t vocab_limit() const { return vocab_limit_; }
  // Reads everything once and checks every id now (an eager form of the lazy
  // check in read(); costs one pass over the file).
  void validate_all() const;

 protected:
  TokenSource(std::string path, int64_t size) : path_(std::move(path)), size_(size) {}
  void set_size(int64_t size) { size_ = size; }  // for readers that count while parsing
  // Copies [begin, begin + count), already bounds-checked.
  virtual void read_raw(int64_t begin, int64_t count, int32_t* out) const = 0;
  // Throws if the file under the source changed since it was opened (a
  // truncated mapped file would SIGBUS in read_raw). Run before every read.
  virtual void check_unchanged() const {}

 private:
  std::string path_;
  int64_t size_ = 0;
  uint32_t vocab_limit_ = 0;
};

// Several sources end to end, as one.
class ConcatTokenSource final : public TokenSource {
 public:
  explicit ConcatTokenSource(std::vector<std::unique_ptr<TokenSource>> parts);
  uint32_t vocab_hint() const override;
  // The parts' common hash (0 when none records one). Parts whose known
  // hashes differ are refused by the constructor.
  uint64_t tokenizer_hash() const override { return tokenizer_hash_; }
  std::string describe() const override;

 private:
  void read_raw(int64_t begin, int64_t count, int32_t* out) const override;
  std::vector<std::unique_ptr<TokenSource>> parts_;
  std::vector<int64_t> starts_;  // (parts + 1,) first token of each part, then the total
  uint64_t tokenizer_hash_ = 0;
};

struct OpenOptions {
  uint32_t vocab_size = 0;      // if nonzero: the id check limit (and must be >= the file's own vocab)
  uint64_t tokenizer_hash = 0;  // if nonzero: must equal the file's (where the format records one)
};

// Opens one file, telling the format by its header: tessera's magic, llm.c's
// magic, or a Megatron .bin/.idx pair (path may be the prefix, the .bin or
// the .idx).
std::unique_ptr<TokenSource> open_token_source(const std::string& path, const OpenOptions& opts = {});
// Opens several (each as above) as one ConcatTokenSource; one path is returned as is.
std::unique_ptr<TokenSource> open_token_sources(const std::vector<std::string>& paths, const OpenOptions& opts = {});

// The integer types token files store ids as (all little-endian).
enum class IntType : uint8_t { U8, I8, U16, I16, U32, I32, I64 };
int int_type_size(IntType t);
const char* int_type_name(IntType t);
// Copies count ids of type t at src (maybe unaligned) into out (count,).
// Values outside int32 become INT32_MIN, which read()'s id check rejects.
void widen_tokens(const uint8_t* src, IntType t, int64_t count, int32_t* out);

}  // namespace tessera::data
