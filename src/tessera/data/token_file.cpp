#include "tessera/data/token_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/data/tokenizer_identity.h"

namespace tessera::data {

namespace {

template <typename T>
void put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));  // little-endian host
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// (64,) header bytes
void pack_header(const TokenFileHeader& h, uint8_t* out) {
  std::memset(out, 0, kTokenFileHeaderBytes);
  std::memcpy(out, kTokenFileMagic, 8);
  put<uint32_t>(out + 8, h.version);
  put<uint32_t>(out + 12, h.token_bytes);
  put<uint64_t>(out + 16, h.token_count);
  put<uint64_t>(out + 24, h.tokenizer_hash);
  put<uint32_t>(out + 32, h.vocab_size);
  put<uint32_t>(out + 36, h.eot_id);
  put<uint64_t>(out + 40, h.document_count);
}

}  // namespace

// ---- writer -------------------------------------------------------------------

TokenFileWriter::TokenFileWriter(std::string path, uint32_t vocab_size, uint64_t tokenizer_hash, int32_t eot_id)
    : path_(std::move(path)) {
  TESSERA_CHECK(vocab_size > 0, "{}: vocabulary size must be positive", path_);
  header_.vocab_size = vocab_size;
  header_.token_bytes = token_bytes_for_vocab(vocab_size);
  header_.tokenizer_hash = tokenizer_hash;
  header_.eot_id = eot_id < 0 ? 0xFFFFFFFFu : uint32_t(eot_id);
  out_ = std::make_unique<OutputFile>(path_, "--output");
  // The header's counts are written last, over the first bytes.
  TESSERA_CHECK(out_->seekable(), "--output {}: a token file's header is written last, so it needs a file "
                "(or a device such as /dev/null), not a pipe", path_);
  buf_.resize(kTokenFileHeaderBytes);
  pack_header(header_, buf_.data());  // count 0 until close()
}

TokenFileWriter::~TokenFileWriter() = default;  // an unclosed OutputFile removes its temporary

void TokenFileWriter::flush() {
  out_->write(buf_.data(), buf_.size());
  buf_.clear();
}

void TokenFileWriter::append(std::span<const int32_t> ids) {
  TESSERA_CHECK(out_, "{}: append after close", path_);
  const size_t tb = header_.token_bytes;
  const size_t at = buf_.size();
  buf_.resize(at + ids.size() * tb);
  uint8_t* p = buf_.data() + at;
  for (size_t i = 0; i < ids.size(); ++i) {
    TESSERA_CHECK(ids[i] >= 0 && uint32_t(ids[i]) < header_.vocab_size, "{}: token id {} is outside the vocabulary of {}",
                  path_, ids[i], header_.vocab_size);
    if (tb == 2) put<uint16_t>(p + i * 2, uint16_t(ids[i]));
    else put<uint32_t>(p + i * 4, uint32_t(ids[i]));
  }
  header_.token_count += ids.size();
  if (buf_.size() >= (size_t(1) << 20)) flush();
}

void TokenFileWriter::close() {
  TESSERA_CHECK(out_, "{}: closed twice", path_);
  flush();
  uint8_t hdr[kTokenFileHeaderBytes];
  pack_header(header_, hdr);
  out_->write_at(hdr, sizeof hdr, 0);
  out_->commit();
  out_.reset();
}

// ---- reader -------------------------------------------------------------------

namespace {

TokenFileHeader parse_header(const MappedFile& m) {
  const std::string& path = m.path();
  TESSERA_CHECK(m.size() >= kTokenFileHeaderBytes, "{}: truncated token file: {} bytes, shorter than the {}-byte header", path,
                m.size(), kTokenFileHeaderBytes);
  const uint8_t* p = m.data();
  TESSERA_CHECK(std::memcmp(p, kTokenFileMagic, 8) == 0, "{}: not a tessera token file (bad magic)", path);
  TokenFileHeader h;
  h.version = get<uint32_t>(p + 8);
  TESSERA_CHECK(h.version == kTokenFileVersion, "{}: token file version {} is not supported (this build reads version {})", path,
                h.version, kTokenFileVersion);
  h.token_bytes = get<uint32_t>(p + 12);
  TESSERA_CHECK(h.token_bytes == 2 || h.token_bytes == 4, "{}: bad token width {} bytes in the header (expected 2 or 4)", path,
                h.token_bytes);
  h.token_count = get<uint64_t>(p + 16);
  h.tokenizer_hash = get<uint64_t>(p + 24);
  h.vocab_size = get<uint32_t>(p + 32);
  h.eot_id = get<uint32_t>(p + 36);
  h.document_count = get<uint64_t>(p + 40);
  TESSERA_CHECK(h.vocab_size > 0 && (h.token_bytes == 4 || h.vocab_size <= 65536),
                "{}: vocabulary size {} in the header does not fit {}-byte tokens", path, h.vocab_size, h.token_bytes);
  // The count comes from the file: compared by division, so no product can
  // wrap into a size that passes (the file is at least the header, above).
  TESSERA_CHECK(h.token_count <= (m.size() - kTokenFileHeaderBytes) / h.token_bytes,
                "{}: truncated token file: the header promises {} tokens of {} bytes but the file has {} bytes", path,
                h.token_count, h.token_bytes, m.size());
  const uint64_t want = kTokenFileHeaderBytes + h.token_count * h.token_bytes;
  TESSERA_CHECK(m.size() == want, "{}: {} bytes of trailing data after the {} tokens the header promises", path,
                m.size() - want, h.token_count);
  return h;
}

}  // namespace

TokenFile::TokenFile(const std::string& path) : TokenFile(MappedFile(path)) {}

TokenFile::TokenFile(MappedFile map)
    : TokenSource(map.path(), int64_t(parse_header(map).token_count)), map_(std::move(map)), header_(parse_header(map_)) {
  set_vocab_limit(header_.vocab_size);
}

std::string TokenFile::describe() const {
  return fmt::format("tessera token file {}: {} tokens, uint{}, vocab {}, {} documents, tokenizer {:016x}", path(), size(),
                     header_.token_bytes * 8, header_.vocab_size, header_.document_count, header_.tokenizer_hash);
}

void TokenFile::read_raw(int64_t begin, int64_t count, int32_t* out) const {
  const uint8_t* p = map_.data() + kTokenFileHeaderBytes + size_t(begin) * header_.token_bytes;
  widen_tokens(p, header_.token_bytes == 2 ? IntType::U16 : IntType::U32, count, out);
}

void check_tokenizer_hash(const TokenSource& src, uint64_t expected, const std::string& tokenizer_name) {
  same_tokenizer({{tokenizer_name, expected}, {src.path(), src.tokenizer_hash()}});
}

}  // namespace tessera::data
