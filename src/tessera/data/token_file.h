// tessera's token file: a 64-byte header, then the ids, mmap-ready.
//
//   offset  size  field
//   0       8     magic "TSRTOKEN"
//   8       4     version (1)
//   12      4     bytes per token: 2 (uint16, vocab <= 65536) or 4 (uint32)
//   16      8     token count
//   24      8     tokenizer hash (Tokenizer::hash(); 0 = unknown)
//   32      4     vocabulary size (every id is below it)
//   36      4     id of <|endoftext|> (0xFFFFFFFF if none)
//   40      8     document count (informational)
//   48      16    reserved, zero
//   64      count * bytes-per-token   token ids, little-endian
//
// All fields little-endian. The writer writes to PATH.tmp and renames it on
// close(), so a crashed encode never leaves a file that looks complete.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "tessera/core/output_file.h"
#include "tessera/data/mapped_file.h"
#include "tessera/data/token_source.h"

namespace tessera::data {

inline constexpr char kTokenFileMagic[8] = {'T', 'S', 'R', 'T', 'O', 'K', 'E', 'N'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenFileHeaderBytes = 64;

struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;
  uint32_t token_bytes = 2;
  uint64_t token_count = 0;
  uint64_t tokenizer_hash = 0;
  uint32_t vocab_size = 0;
  uint32_t eot_id = 0xFFFFFFFFu;
  uint64_t document_count = 0;
};

// Bytes per token for a vocabulary: 2 if every id fits in uint16, else 4.
inline uint32_t token_bytes_for_vocab(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

class TokenFileWriter {
 public:
  TokenFileWriter(std::string path, uint32_t vocab_size, uint64_t tokenizer_hash, int32_t eot_id = -1);
  ~TokenFileWriter();  // abandons (deletes the temporary) unless close() ran
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // Appends ids; each must be in [0, vocab_size).
  void append(std::span<const int32_t> ids);
  void end_document() { ++header_.document_count; }
  // Writes the final header and commits the output (core/output_file.h:
  // renamed over a regular file, written through a device).
  void close();
  uint64_t count() const { return header_.token_count; }

 private:
  void flush();
  std::string path_;
  std::unique_ptr<OutputFile> out_;  // null once closed
  TokenFileHeader header_;
  std::vector<uint8_t> buf_;  // (bytes,) packed ids not yet written, flushed at ~1 MiB
};

class TokenFile final : public TokenSource {
 public:
  // Checks magic, version, dtype and the file's length against the count.
  explicit TokenFile(const std::string& path);
  const TokenFileHeader& header() const { return header_; }
  uint32_t vocab_hint() const override { return header_.vocab_size; }
  uint64_t tokenizer_hash() const override { return header_.tokenizer_hash; }
  std::string describe() const override;

 private:
  explicit TokenFile(MappedFile map);
  void read_raw(int64_t begin, int64_t count, int32_t* out) const override;
  void check_unchanged() const override { map_.check_unchanged(); }
  MappedFile map_;  // whole file: (64,) header then (count,) ids
  TokenFileHeader header_;
};

// Throws unless the file's tokenizer hash is unknown (0) or equals `expected`;
// the message names the file and both hashes.
void check_tokenizer_hash(const TokenSource& src, uint64_t expected, const std::string& tokenizer_name);

}  // namespace tessera::data
