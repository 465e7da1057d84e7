// Fixed token windows for the PyTorch agreement tests: sample i is row
// i % rows of a table both sides read, so the engine and the reference see
// the same batches without sharing a sampler.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/train/batch_source.h"

namespace tessera::test {

class FixedBatches : public BatchSource {
 public:
  // t: (rows, T + 1) token windows.
  FixedBatches(std::vector<int32_t> t, int64_t rows, int64_t vocab)
      : tokens_(std::move(t)), rows_(rows), vocab_(vocab) {}
  void fill(Split, int64_t first, int64_t count, int64_t T, int32_t* out) const override {
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(tokens_.begin() + ((first + i) % rows_) * (T + 1), T + 1, out + i * (T + 1));
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override { return "fixed"; }

 private:
  std::vector<int32_t> tokens_;  // (rows, T + 1)
  int64_t rows_, vocab_;
};

// n raw float32s, native byte order (numpy.fromfile reads them back).
inline void write_floats(const std::filesystem::path& p, const float* x, int64_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(x), std::streamsize(n * sizeof(float)));
}

}  // namespace tessera::test
