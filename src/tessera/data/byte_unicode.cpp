#include "tessera/data/byte_unicode.h"

#include "tessera/data/utf8.h"

namespace tessera::data {

const ByteUnicode& byte_unicode() {
  static const ByteUnicode table = [] {
    ByteUnicode t{};
    std::array<bool, 256> printable{};
    int k = 0;
    auto keep = [&](int lo, int hi) {
      for (int b = lo; b <= hi; ++b) {
        printable[b] = true;
        t.byte_to_cp[b] = uint32_t(b);
        t.order[k++] = uint8_t(b);
      }
    };
    keep('!', '~');
    keep(0xA1, 0xAC);
    keep(0xAE, 0xFF);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      if (printable[b]) continue;
      t.byte_to_cp[b] = next++;
      t.order[k++] = uint8_t(b);
    }
    t.from_cp.fill(-1);
    for (int b = 0; b < 256; ++b) t.from_cp[t.byte_to_cp[b]] = int16_t(b);
    return t;
  }();
  return table;
}

int32_t ByteUnicode::cp_to_byte(uint32_t cp) const { return cp < from_cp.size() ? from_cp[cp] : -1; }

std::string bytes_to_gpt2(std::string_view bytes) {
  const auto& t = byte_unicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8_append(out, t.byte_to_cp[b]);
  return out;
}

bool gpt2_to_bytes(std::string_view s, std::string* bytes) {
  const auto& t = byte_unicode();
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  bytes->clear();
  for (size_t i = 0; i < s.size();) {
    int len;
    uint32_t cp = utf8_decode(p, s.size(), i, &len);
    if (cp == kInvalidCodePoint) return false;
    int32_t b = t.cp_to_byte(cp);
    if (b < 0) return false;
    bytes->push_back(char(b));
    i += size_t(len);
  }
  return true;
}

}  // namespace tessera::data
