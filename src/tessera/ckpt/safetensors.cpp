#include "tessera/ckpt/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/durable_io.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"

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

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), bytes_(read_file(path)) {
  TESSERA_CHECK(bytes_.size() >= 8, "{}: not a safetensors file (shorter than 8 bytes)", path);
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t(uint8_t(bytes_[size_t(i)])) << (8 * i);
  TESSERA_CHECK(len <= bytes_.size() - 8, "{}: header length {} runs past the end of the file",
                path, len);
  data_start_ = 8 + len;
  json header;
  try {
    header = json::parse(bytes_.substr(8, len));
  } catch (const json::exception& e) {
    fail("{}: bad safetensors header: {}", path, e.what());
  }
  TESSERA_CHECK(header.is_object(), "{}: safetensors header is not a JSON object", path);
  const uint64_t data_size = bytes_.size() - data_start_;
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
  const char* p = bytes_.data() + data_start_ + e.begin;
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

}  // namespace tessera::ckpt
