// BatchSource: where training windows come from. Sample i of the run is a
// fixed window of T + 1 tokens determined by (seed, i) alone, so a step sees
// the same global batch whatever the parallel layout: dp rank r, micro-batch
// k of step s reads samples the layout-independent formula assigns it.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

enum class Split { Train, Valid };

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // out (count, T + 1): windows of samples [first, first + count) of `split`.
  virtual void fill(Split split, int64_t first, int64_t count, int64_t T, int32_t* out) const = 0;
  // Token ids are < vocab_size().
  virtual int64_t vocab_size() const = 0;
  virtual std::string describe() const = 0;
  // Windows one pass over `split` visits (validation: windows i*T .. i*T +
  // T from its start); 0 when that is no fixed number (a weighted blend).
  virtual int64_t windows(Split split) const { return 0; }
};

}  // namespace tessera
