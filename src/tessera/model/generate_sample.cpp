#include "tessera/model/generate_sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessera/core/error.h"

namespace tessera {

int32_t argmax_token(const float* logits, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

int32_t sample_token(const float* logits, int64_t V, const SamplingConfig& cfg, Rng& rng) {
  TESSERA_CHECK(cfg.top_p > 0 && cfg.top_p <= 1, "--top-p must be in (0, 1] (got {})", cfg.top_p);
  TESSERA_CHECK(cfg.top_k >= 0, "--top-k must be >= 0 (got {})", cfg.top_k);
  if (cfg.temperature <= 0 || cfg.top_k == 1) return argmax_token(logits, V);

  // Candidates, most likely first (ties: lower id first, as argmax).
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = size_t(V);
  if (cfg.top_k > 0 && cfg.top_k < V) {
    keep = size_t(cfg.top_k);
    std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(keep), ids.end(), before);
  } else if (cfg.top_p < 1) {
    std::sort(ids.begin(), ids.end(), before);  // top-p needs them in order
  }
  ids.resize(keep);

  // Softmax at the temperature, in double (small probabilities must not
  // vanish before the cumulative sums below).
  const double inv_t = 1.0 / double(cfg.temperature);
  double max_logit = -INFINITY;
  for (int32_t i : ids) max_logit = std::max(max_logit, double(logits[i]));
  std::vector<double> p(ids.size());
  double sum = 0;
  for (size_t j = 0; j < ids.size(); ++j) sum += p[j] = std::exp((double(logits[ids[j]]) - max_logit) * inv_t);

  if (cfg.top_p < 1) {
    // Smallest prefix (ids are sorted) whose mass reaches top_p; at least one.
    double mass = 0;
    size_t n = 0;
    while (n < p.size() && (n == 0 || mass < cfg.top_p * sum)) mass += p[n++];
    p.resize(n);
    ids.resize(n);
    sum = mass;
  }

  // 53-bit uniform in [0, 1): inverse CDF over the kept set.
  const double u = double(rng.next_u64() >> 11) * (1.0 / 9007199254740992.0) * sum;
  double acc = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    acc += p[j];
    if (u < acc) return ids[j];
  }
  return ids.back();  // rounding at the top end
}

}  // namespace tessera
