#include "tessera/data/token_source.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/data/tokenizer_identity.h"

namespace tessera::data {

int int_type_size(IntType t) {
  switch (t) {
    case IntType::U8: case IntType::I8: return 1;
    case IntType::U16: case IntType::I16: return 2;
    case IntType::U32: case IntType::I32: return 4;
    case IntType::I64: return 8;
  }
  return 0;
}

const char* int_type_name(IntType t) {
  switch (t) {
    case IntType::U8: return "uint8";
    case IntType::I8: return "int8";
    case IntType::U16: return "uint16";
    case IntType::I16: return "int16";
    case IntType::U32: return "uint32";
    case IntType::I32: return "int32";
    case IntType::I64: return "int64";
  }
  return "?";
}

namespace {
template <typename T>
void widen(const uint8_t* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, src + i * int64_t(sizeof(T)), sizeof(T));  // unaligned-safe; the hosts are little-endian
    if constexpr (sizeof(T) >= 4) {
      out[i] = (int64_t(v) >= 0 && int64_t(v) <= INT32_MAX) ? int32_t(v) : INT32_MIN;
    } else {
      out[i] = int32_t(v);
    }
  }
}
}  // namespace

void widen_tokens(const uint8_t* src, IntType t, int64_t count, int32_t* out) {
  switch (t) {
    case IntType::U8: return widen<uint8_t>(src, count, out);
    case IntType::I8: return widen<int8_t>(src, count, out);
    case IntType::U16: return widen<uint16_t>(src, count, out);
    case IntType::I16: return widen<int16_t>(src, count, out);
    case IntType::U32: return widen<uint32_t>(src, count, out);
    case IntType::I32: return widen<int32_t>(src, count, out);
    case IntType::I64: return widen<int64_t>(src, count, out);
  }
}

// ---- TokenSource --------------------------------------------------------------

void TokenSource::read(int64_t begin, int64_t count, int32_t* out) const {
  TESSERA_CHECK(begin >= 0 && count >= 0 && begin <= size_ - count,
                "{}: cannot read tokens [{}, {}): the file has {} tokens", path_, begin, begin + count, size_);
  check_unchanged();
  read_raw(begin, count, out);
  // Negative ids (and int64 ids beyond int32) are always wrong.
  const uint32_t limit = vocab_limit_ ? vocab_limit_ : uint32_t(INT32_MAX) + 1u;
  for (int64_t i = 0; i < count; ++i) {
    if (uint32_t(out[i]) >= limit) {
      if (out[i] < 0) fail("{}: token {} is not a valid token id (negative or beyond int32)", path_, begin + i);
      fail("{}: token {} has id {}, but the vocabulary has {} tokens (was this file made with another tokenizer?)", path_,
           begin + i, out[i], limit);
    }
  }
}

std::vector<int32_t> TokenSource::read(int64_t begin, int64_t count) const {
  std::vector<int32_t> out(size_t(std::max<int64_t>(count, 0)));
  read(begin, count, out.data());
  return out;
}

void TokenSource::validate_all() const {
  constexpr int64_t kBlock = int64_t(1) << 20;
  std::vector<int32_t> buf(static_cast<size_t>(kBlock));  // (kBlock,) scratch
  for (int64_t b = 0; b < size_; b += kBlock) read(b, std::min(kBlock, size_ - b), buf.data());
}

// ---- ConcatTokenSource --------------------------------------------------------------

namespace {
std::string concat_name(const std::vector<std::unique_ptr<TokenSource>>& parts) {
  if (parts.empty()) return "(no files)";
  if (parts.size() == 1) return parts[0]->path();
  return parts[0]->path() + " (+" + std::to_string(parts.size() - 1) + " more)";
}
int64_t concat_size(const std::vector<std::unique_ptr<TokenSource>>& parts) {
  int64_t n = 0;
  for (const auto& p : parts) n += p->size();
  return n;
}
}  // namespace

ConcatTokenSource::ConcatTokenSource(std::vector<std::unique_ptr<TokenSource>> parts)
    : TokenSource(concat_name(parts), concat_size(parts)), parts_(std::move(parts)) {
  TESSERA_CHECK(!parts_.empty(), "no token files given");
  // Files read as one sequence must be one tokenizer's ids.
  std::vector<TokenizerId> ids;
  for (const auto& p : parts_) ids.push_back({p->path(), p->tokenizer_hash()});
  tokenizer_hash_ = same_tokenizer(ids).hash;
  starts_.push_back(0);
  for (const auto& p : parts_) starts_.push_back(starts_.back() + p->size());
  set_vocab_limit(vocab_hint());
}

uint32_t ConcatTokenSource::vocab_hint() const {
  uint32_t v = 0;
  for (const auto& p : parts_) v = std::max(v, p->vocab_hint());
  return v;
}

std::string ConcatTokenSource::describe() const {
  std::string s = std::to_string(parts_.size()) + " files, " + std::to_string(size()) + " tokens:";
  for (const auto& p : parts_) s += "\n  " + p->describe();
  return s;
}

void ConcatTokenSource::read_raw(int64_t begin, int64_t count, int32_t* out) const {
  // part holding `begin`: the last start <= begin
  size_t k = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (count > 0) {
    int64_t local = begin - starts_[k];
    int64_t n = std::min(count, parts_[k]->size() - local);
    if (n > 0) {
      parts_[k]->read(local, n, out);  // checked against the part's own limit too
      out += n;
      begin += n;
      count -= n;
    }
    ++k;
  }
}

}  // namespace tessera::data
