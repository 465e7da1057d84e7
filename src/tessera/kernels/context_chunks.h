// Which tokens of a sequence a context-parallel rank holds (Megatron-Core's
// load-balanced layout for causal attention): the sequence of T tokens is
// cut into 2*cp equal chunks and rank r holds chunks r and 2*cp-1-r, in that
// order. Under a causal mask a late chunk does far more work than an early
// one; pairing chunk r with its mirror gives every rank the same amount of
// attention. Plain arithmetic every layer reads: the data loader (which
// rows a rank gets), RoPE and the dropout masks (global positions), and the
// ring attention's causal mask.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera {

struct ContextChunks {
  int64_t T = 1;   // tokens of a whole sequence (--seq-length)
  int64_t cp = 1;  // context-parallel ranks
  int64_t rank = 0;

  bool divides() const { return cp >= 1 && T % (2 * cp) == 0; }
  int64_t chunk() const { return T / (2 * cp); }  // tokens of one chunk
  int64_t local_T() const { return T / cp; }      // tokens this rank holds
  // The global chunk index of this rank's local chunk c (0 or 1).
  int64_t global_chunk(int64_t c) const { return c == 0 ? rank : 2 * cp - 1 - rank; }
  // Global position of local row t (0 <= t < local_T).
  int64_t position(int64_t t) const {
    const int64_t n = chunk();
    return global_chunk(t / n) * n + t % n;
  }
  // The positions of all local rows: (local_T).
  std::vector<int64_t> positions() const {
    std::vector<int64_t> p(local_T());
    for (int64_t t = 0; t < local_T(); t++) p[t] = position(t);
    return p;
  }
};

// cp = 1 holds the whole sequence in order: position(t) = t.

}  // namespace tessera
