#include "tessera/data/megatron_dataset.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera::data {

namespace {

constexpr size_t kIdxHeaderBytes = 34;  // 9 magic + 8 version + 1 dtype + 8 S + 8 D

template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

IntType dtype_from_code(uint8_t code, const std::string& path) {
  switch (code) {
    case 1: return IntType::U8;
    case 2: return IntType::I8;
    case 3: return IntType::I16;
    case 4: return IntType::I32;
    case 5: return IntType::I64;
    case 8: return IntType::U16;
    case 6: case 7: fail("{}: dtype code {} is a floating-point type; token ids must be integers", path, code);
    default: fail("{}: unknown dtype code {} (Megatron uses 1-8)", path, code);
  }
}

}  // namespace

MegatronDataset::MegatronDataset(const std::string& prefix)
    : MegatronDataset(prefix, MappedFile(prefix + ".idx", "Megatron index"),
                      MappedFile(prefix + ".bin", "token data")) {}

MegatronDataset::MegatronDataset(const std::string& prefix, MappedFile idx, MappedFile bin)
    : TokenSource(prefix + ".bin", 0), bin_(std::move(bin)) {
  const std::string& ip = idx.path();
  const uint8_t* p = idx.data();
  TESSERA_CHECK(idx.size() >= kIdxHeaderBytes, "{}: truncated index: {} bytes, shorter than the {}-byte header", ip, idx.size(),
                kIdxHeaderBytes);
  TESSERA_CHECK(std::memcmp(p, kMegatronIdxMagic, 9) == 0, "{}: not a Megatron index (bad magic, expected MMIDIDX)", ip);
  uint64_t version = get<uint64_t>(p + 9);
  TESSERA_CHECK(version == 1, "{}: Megatron index version {} is not supported (expected 1)", ip, version);
  dtype_ = dtype_from_code(p[17], ip);
  const uint64_t S = get<uint64_t>(p + 18), D = get<uint64_t>(p + 26);
  TESSERA_CHECK(S < (uint64_t(1) << 40) && D < (uint64_t(1) << 40) &&
                    idx.size() >= kIdxHeaderBytes + 12 * S + 8 * D,
                "{}: truncated index: {} sequences and {} document indices need {} bytes, the file has {}", ip, S, D,
                kIdxHeaderBytes + 12 * S + 8 * D, idx.size());
  const uint8_t* lengths = p + kIdxHeaderBytes;  // (S,) int32
  const uint8_t* pointers = lengths + 4 * S;     // (S,) int64
  const uint8_t* docs = pointers + 8 * S;        // (D,) int64
  const int64_t tb = int_type_size(dtype_);

  seq_start_.resize(S + 1);
  seq_ptr_.resize(S);
  seq_start_[0] = 0;
  for (uint64_t s = 0; s < S; ++s) {
    int32_t len = get<int32_t>(lengths + 4 * s);
    int64_t ptr = get<int64_t>(pointers + 8 * s);
    TESSERA_CHECK(len >= 0, "{}: sequence {} has negative length {}", ip, s, len);
    // Written as "fits in what is left after ptr" so no sum can wrap.
    TESSERA_CHECK(range_inside(ptr, int64_t(len) * tb, int64_t(bin_.size())),
                  "{}: truncated data file: sequence {} needs {} bytes from byte {} but the file has {} bytes", bin_.path(), s,
                  int64_t(len) * tb, ptr, bin_.size());
    seq_ptr_[s] = ptr;
    seq_start_[s + 1] = checked_add(seq_start_[s], len, "Megatron index token count");
  }
  doc_start_.resize(D);
  int64_t prev = 0;
  for (uint64_t d = 0; d < D; ++d) {
    int64_t si = get<int64_t>(docs + 8 * d);
    TESSERA_CHECK(si >= prev && uint64_t(si) <= S, "{}: document index {} = {} is out of order or beyond {} sequences", ip, d, si,
                  S);
    doc_start_[d] = seq_start_[size_t(si)];
    prev = si;
  }
  set_size(seq_start_.back());
}

std::string MegatronDataset::describe() const {
  return fmt::format("Megatron indexed dataset {}: {} tokens, {}, {} sequences, {} documents", path(), size(),
                     int_type_name(dtype_), num_sequences(), std::max<int64_t>(num_documents(), 0));
}

void MegatronDataset::read_raw(int64_t begin, int64_t count, int32_t* out) const {
  const int64_t tb = int_type_size(dtype_);
  // sequence holding `begin`: the last start <= begin
  size_t s = size_t(std::upper_bound(seq_start_.begin(), seq_start_.end(), begin) - seq_start_.begin()) - 1;
  while (count > 0) {
    int64_t local = begin - seq_start_[s];
    int64_t n = std::min(count, seq_start_[s + 1] - begin);
    if (n > 0) {
      widen_tokens(bin_.data() + seq_ptr_[s] + local * tb, dtype_, n, out);
      out += n;
      begin += n;
      count -= n;
    }
    ++s;
  }
}

void write_megatron_dataset(const std::string& prefix, const std::vector<std::vector<int32_t>>& documents) {
  int32_t max_id = 0;
  for (const auto& d : documents)
    for (int32_t t : d) max_id = std::max(max_id, t);
  const bool u16 = max_id < 65500;
  const int tb = u16 ? 2 : 4;
  std::ofstream bin(prefix + ".bin", std::ios::binary | std::ios::trunc);
  TESSERA_CHECK(bin.good(), "cannot write {}.bin", prefix);
  std::vector<int32_t> lengths;   // (S,)
  std::vector<int64_t> pointers;  // (S,)
  std::vector<int64_t> doc_idx{0};  // (documents + 1,)
  int64_t ptr = 0;
  for (const auto& d : documents) {
    for (int32_t t : d) {
      if (u16) {
        uint16_t v = uint16_t(t);
        bin.write(reinterpret_cast<const char*>(&v), 2);
      } else {
        bin.write(reinterpret_cast<const char*>(&t), 4);
      }
    }
    lengths.push_back(int32_t(d.size()));
    pointers.push_back(ptr);
    ptr += int64_t(d.size()) * tb;
    doc_idx.push_back(int64_t(lengths.size()));
  }
  TESSERA_CHECK(bin.good(), "error writing {}.bin", prefix);
  std::ofstream idx(prefix + ".idx", std::ios::binary | std::ios::trunc);
  TESSERA_CHECK(idx.good(), "cannot write {}.idx", prefix);
  uint64_t version = 1, S = lengths.size(), D = doc_idx.size();
  uint8_t code = u16 ? 8 : 4;
  idx.write(kMegatronIdxMagic, 9);
  idx.write(reinterpret_cast<const char*>(&version), 8);
  idx.write(reinterpret_cast<const char*>(&code), 1);
  idx.write(reinterpret_cast<const char*>(&S), 8);
  idx.write(reinterpret_cast<const char*>(&D), 8);
  idx.write(reinterpret_cast<const char*>(lengths.data()), std::streamsize(4 * S));
  idx.write(reinterpret_cast<const char*>(pointers.data()), std::streamsize(8 * S));
  idx.write(reinterpret_cast<const char*>(doc_idx.data()), std::streamsize(8 * D));
  TESSERA_CHECK(idx.good(), "error writing {}.idx", prefix);
}

}  // namespace tessera::data
