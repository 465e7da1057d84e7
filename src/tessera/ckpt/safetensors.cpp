#include "tessera/ckpt/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/durable_io.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/core/regular_file.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

size_t dtype_bytes(const std::string& d) {
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "I8" || d == "U8" || d == "BOOL") return 1;
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while (!(man & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

int64_t SafetensorsEntry::numel() const {
  return checked_numel(shape, "safetensors tensor shape");
}

void SafetensorsWriter::add(const std::string& name, std::vector<int64_t> shape, const float* data) {
  items_.push_back({name, std::move(shape), data});
}

void SafetensorsWriter::write(const std::string& path) const {
  json header = json::object();
  uint64_t offset = 0;
  for (const Item& it : items_) {
    uint64_t n = 1;
    for (int64_t d : it.shape) n *= uint64_t(d);
    header[it.name] = {{"dtype", "F32"}, {"shape", it.shape}, {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  if (!meta_.empty()) header["__metadata__"] = meta_;
  std::string h = header.dump();
  // Pad with spaces so the data starts 8-byte aligned (what the reference
  // implementation does; lets readers map tensors in place).
  while ((8 + h.size()) % 8) h += ' ';

  // Atomically over a file (a failed write, a full disk, removes its
  // temporary), written through a device: core/output_file.h.
  OutputFile w(path, "output");
  uint64_t len = h.size();
  unsigned char le[8];
  for (int i = 0; i < 8; ++i) le[i] = (len >> (8 * i)) & 0xff;
  w.write(le, 8);
  w.write(h.data(), h.size());
  for (const Item& it : items_) {
    uint64_t n = 1;
    for (int64_t d : it.shape) n *= uint64_t(d);
    w.write(it.data, n * 4);  // little-endian host
  }
  w.commit();
}

std::vector<std::string> SafetensorsWriter::names() const {
  std::vector<std::string> out;
  for (const Item& it : items_) out.push_back(it.name);
  return out;
}

uint64_t SafetensorsWriter::Item::bytes() const {
  uint64_t n = 4;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

uint64_t SafetensorsWriter::tensor_bytes() const {
  uint64_t n = 0;
  for (const Item& it : items_) n += it.bytes();
  return n;
}

std::vector<SafetensorsWriter> SafetensorsWriter::split(uint64_t max_bytes) const {
  std::vector<SafetensorsWriter> shards;
  SafetensorsWriter current;  // the shard being filled
  uint64_t current_bytes = 0;
  for (const Item& it : items_) {
    const uint64_t b = it.bytes();
    if (b > max_bytes) {  // alone in its own shard; the one being filled stays open
      shards.emplace_back().items_.push_back(it);
      continue;
    }
    if (!current.items_.empty() && current_bytes + b > max_bytes) {
      shards.push_back(std::move(current));
      current = SafetensorsWriter{};
      current_bytes = 0;
    }
    current.items_.push_back(it);
    current_bytes += b;
  }
  if (!current.items_.empty()) shards.push_back(std::move(current));
  for (SafetensorsWriter& w : shards) w.meta_ = meta_;
  return shards;
}

namespace {

// Closes the descriptor whichever way the reader leaves.
struct Fd {
  int fd;
  ~Fd() { ::close(fd); }
};

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const Fd f{open_regular_file(path, "file")};
  struct stat st {};
  TESSERA_CHECK(::fstat(f.fd, &st) == 0, "{}: cannot stat: {}", path, std::strerror(errno));
  const uint64_t file_size = uint64_t(st.st_size);
  TESSERA_CHECK(file_size >= 8, "{}: not a safetensors file (shorter than 8 bytes)", path);
  unsigned char le[8];
  read_exact(f.fd, le, 8, 0, path);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t(le[i]) << (8 * i);
  TESSERA_CHECK(len <= file_size - 8, "{}: header length {} runs past the end of the file",
                path, len);
  // The reference reader's own limit (safetensors' MAX_HEADER_SIZE): a
  // corrupt length must not make us allocate a shard's worth for the header.
  TESSERA_CHECK(len <= 100000000, "{}: header length {} is over safetensors' 100 MB limit", path,
                len);
  data_start_ = 8 + len;
  std::string text(size_t(len), '\0');
  read_exact(f.fd, text.data(), text.size(), 8, path);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: bad safetensors header: {}", path, e.what());
  }
  TESSERA_CHECK(header.is_object(), "{}: safetensors header is not a JSON object", path);
  const uint64_t data_size = file_size - data_start_;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) continue;
      for (const auto& [k, s] : v.items())
        if (s.is_string()) meta_[k] = s.get<std::string>();
      continue;
    }
    SafetensorsEntry e;
    try {
      e.dtype = v.at("dtype").get<std::string>();
      e.shape = v.at("shape").get<std::vector<int64_t>>();
      e.begin = v.at("data_offsets").at(0).get<uint64_t>();
      e.end = v.at("data_offsets").at(1).get<uint64_t>();
    } catch (const json::exception& ex) {
      fail("{}: tensor {}: bad header entry ({})", path, name, ex.what());
    }
    const size_t es = dtype_bytes(e.dtype);
    TESSERA_CHECK(es > 0, "{}: tensor {}: unknown dtype {}", path, name, e.dtype);
    TESSERA_CHECK(e.begin <= e.end && e.end <= data_size, "{}: tensor {}: bytes [{}, {}) outside the data ({} bytes)",
                  path, name, e.begin, e.end, data_size);
    TESSERA_CHECK(e.end - e.begin ==
                      checked_mul_u64(uint64_t(e.numel()), es, "safetensors tensor size"),
                  "{}: tensor {}: {} bytes for shape of {} {} elements", path, name, e.end - e.begin,
                  e.numel(), e.dtype);
    entries_[name] = std::move(e);
  }
  check_no_overlap();
}

// Two tensors sharing bytes is not a file any writer makes: refuse it rather
// than load one tensor's values into another.
void SafetensorsFile::check_no_overlap() const {
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> byte_order;
  for (const auto& [name, e] : entries_)
    if (e.end > e.begin) byte_order.emplace_back(&name, &e);
  std::sort(byte_order.begin(), byte_order.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < byte_order.size(); ++i) {
    const auto& [pn, p] = byte_order[i - 1];
    const auto& [qn, q] = byte_order[i];
    TESSERA_CHECK(q->begin >= p->end, "{}: tensors {} and {} overlap (bytes [{}, {}) and [{}, {}))",
                  path_, *pn, *qn, p->begin, p->end, q->begin, q->end);
  }
}

const SafetensorsEntry& SafetensorsFile::at(const std::string& name) const {
  auto it = entries_.find(name);
  TESSERA_CHECK(it != entries_.end(), "{}: no tensor named {}", path_, name);
  return it->second;
}

std::vector<float> SafetensorsFile::to_f32(const std::string& name) const {
  const SafetensorsEntry& e = at(name);
  std::string bytes(size_t(e.end - e.begin), '\0');
  {
    const Fd f{open_regular_file(path_, "file")};
    read_exact(f.fd, bytes.data(), bytes.size(), data_start_ + e.begin, path_);
  }
  const char* p = bytes.data();
  std::vector<float> out(static_cast<size_t>(e.numel()));
  if (e.dtype == "F32") {
    std::memcpy(out.data(), p, out.size() * 4);
  } else if (e.dtype == "BF16" || e.dtype == "F16") {
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      if (e.dtype == "BF16") {
        uint32_t bits = uint32_t(h) << 16;
        std::memcpy(&out[i], &bits, 4);
      } else {
        out[i] = half_to_float(h);
      }
    }
  } else {
    fail("{}: tensor {} is {}; only F32, F16 and BF16 can be read", path_, name, e.dtype);
  }
  return out;
}

uint64_t SafetensorsFile::tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, e] : entries_) n += e.end - e.begin;
  return n;
}

}  // namespace tessera::ckpt
