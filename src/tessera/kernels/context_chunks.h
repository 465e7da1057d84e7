// Which tokens of a sequence a context-parallel rank holds (Megatron-Core's
// load-balanced layout for causal attention): the sequence of T tokens is
// cut into 2*cp equal chunks and rank r holds chunks r and 2*cp-1-r, in that
// order. Under a causal mask a late chunk does far more work than an early
// one; pairing chunk r with its mirror gives every rank the same amount of
// attention. Plain arithmetic every layer reads: the data loader (which
// rows a rank gets), RoPE and the dropout masks (global positions), and the
// ring attention's causal mask.
#pragma once
#include <algorithm>
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

// One run of a rank's rows that is consecutive in the whole sequence too:
// `len` rows from `local` (counted from the first row asked for) of sample
// `sample`, at global positions position, position + 1, ... Its row among
// one process's flattened (B, T) rows is sample * T + position.
struct ChunkRun {
  int64_t local = 0;
  int64_t sample = 0;
  int64_t position = 0;
  int64_t len = 0;
};

// f(run) for the runs of the rank's flattened (B, local_T) rows [row0, row0
// + rows), in row order: all of them (row0 0, rows B * local_T), or a
// sequence-parallel block of them, which may start mid-chunk and cross into
// the next chunk or sample (tensor_parallel.h). Runs end at chunk ends (the
// positions jump there) and at the block's end; with cp = 1 a chunk is the
// whole sequence. What the learned positions and the dropout keys of a
// rank's rows are derived from (model/context_parallel.h).
template <class F>
void chunk_runs(const ContextChunks& ch, int64_t row0, int64_t rows, F&& f) {
  const int64_t n = ch.cp > 1 ? ch.chunk() : ch.T;  // rows of one run at most
  const int64_t Tl = ch.local_T();
  for (int64_t r = row0; r < row0 + rows;) {
    const int64_t t = r % Tl, j = t % n;  // local row in its sample; row in its chunk
    const int64_t len = std::min(n - j, row0 + rows - r);
    f(ChunkRun{r - row0, r / Tl, ch.global_chunk(t / n) * n + j, len});
    r += len;
  }
}

}  // namespace tessera
