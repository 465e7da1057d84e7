// Causal multi-head attention, flash style: queries and keys are visited in
// blocks with an online softmax, so memory is O(block * HS) per thread and the
// (T, T) score matrix never exists.
#include "tessera/kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/rope.h"
#include "tessera/kernels/cpu/storage.h"
#include "tessera/kernels/cpu/vec16.h"
#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

namespace {

// Keys and queries are visited in 64-wide tiles (query tiles aligned with key
// tiles, so the diagonal tile always holds key i for query i), and query rows
// four at a time: a 4 x 64 score block is 16 AVX-512 registers, and each
// loaded key vector feeds four FMAs instead of one.
constexpr int64_t kBlock = 64;
constexpr int64_t kRows = 4;
static_assert(kBlock % kRows == 0);

// Head size rounded up to whole 64-float chunks, so the inner loops over a
// head row have a fixed trip count; the padding is zeros and never written out.
int64_t padded(int64_t HS) { return (HS + kBlock - 1) / kBlock * kBlock; }

// The largest head RoPE takes (a key row is rotated in a stack buffer on
// its way into the transposed tile). Llama heads are 64 or 128.
constexpr int64_t kMaxRopeHead = 1024;

// The tiles below are always fp32; St (storage.h) is the storage of qkv and
// out (fp32, or bf16 / fp16 under --bf16 / --fp16), widened on loading.

// dst (HS, kBlock) = rows [j0, j0 + nk) of one head's k or v, transposed;
// columns nk.. are zero. Score loops then run over keys with unit stride.
// dst (n) = src (n) widened to fp32.
template <class St>
void load_row(float* dst, const typename St::T* src, int64_t n) {
  for (int64_t d = 0; d < n; d++) dst[d] = St::load(src[d]);
}

// RoPE of one call (rope.h): null when the heads have none. rotate(x, t)
// turns a widened q or k row (HS) of position t in place, as it enters a
// tile, so no pass over q and k in memory is needed.
struct Rope {
  std::shared_ptr<const RopeTable> table;
  void rotate(float* x, int64_t t) const {
    rope_rotate(x, table->cos_row(t), table->sin_row(t), table->half);
  }
  void unrotate(float* x, int64_t t) const {
    rope_unrotate(x, table->cos_row(t), table->sin_row(t), table->half);
  }
};

// dst (n) = src (n) widened, rotated to position t when rope is set.
template <class St>
void load_row(float* dst, const typename St::T* src, int64_t n, const Rope* rope, int64_t t) {
  load_row<St>(dst, src, n);
  if (rope) rope->rotate(dst, t);
}

// A head's rows of qkv are HS elements out of every W: the hardware
// prefetchers do not follow that stride, and the tile loads below waited on
// memory for each row. prefetch_row asks for the lines of a row a few rows
// ahead. (n elements of type E at p; no effect on any value.)
constexpr int64_t kAhead = 16;  // rows
template <class E>
inline void prefetch_row(const E* p, int64_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t b = 0; b < n * int64_t(sizeof(E)); b += 64) __builtin_prefetch(c + b);
}

template <class St>
void load_transposed(float* dst, const typename St::T* src, int64_t j0, int64_t nk, int64_t HS,
                     int64_t row_stride, const Rope* rope = nullptr) {
  std::fill(dst, dst + HS * kBlock, 0.0f);
  float row_buf[kMaxRopeHead];  // one rotated key row (RoPE only)
  for (int64_t j = 0; j < nk; j++) {
    const typename St::T* row = src + (j0 + j) * row_stride;  // (HS)
    if (j + kAhead < nk) prefetch_row(row + kAhead * row_stride, HS);
    if (rope) {
      load_row<St>(row_buf, row, HS, rope, j0 + j);
      for (int64_t d = 0; d < HS; d++) dst[d * kBlock + j] = row_buf[d];
    } else {
      for (int64_t d = 0; d < HS; d++) dst[d * kBlock + j] = St::load(row[d]);
    }
  }
}

// dst (n) = src (n) in St's storage (a copy for fp32, rounded once for 16 bits).
template <class St>
void store_row(typename St::T* dst, const float* src, int64_t n) {
  for (int64_t d = 0; d < n; d++) dst[d] = St::store(src[d]);
}

// dst (kBlock, HSP) = rows [j0, j0 + nk) of one head's k or v; padding zero.
template <class St>
void load_rows(float* dst, const typename St::T* src, int64_t j0, int64_t nk, int64_t HS,
               int64_t HSP, int64_t row_stride, const Rope* rope = nullptr) {
  std::fill(dst, dst + kBlock * HSP, 0.0f);
  for (int64_t j = 0; j < nk; j++) {
    if (j + kAhead < nk) prefetch_row(src + (j0 + j + kAhead) * row_stride, HS);
    load_row<St>(dst + j * HSP, src + (j0 + j) * row_stride, HS, rope, j0 + j);
  }
}

using Block = float[kRows][kBlock];  // (kRows, kBlock) scores or probabilities

// The tile loops below hold a 64-wide row of a tile as kV vectors (vec16.h)
// and load each operand that several FMAs share into a register once.
constexpr int64_t kV = kBlock / 16;
static_assert(kBlock % 16 == 0);

// S (kRows, kBlock) = x (kRows rows of HS) @ tile (HS, kBlock), for the
// tile's first 16 * NV keys; the rest of S is 0. The score scale is already
// in x: callers scale q rows once (scaled_row) rather than once per key
// tile and row here, the same product x * scale either way. Each S element
// sums its HS products in order d = 0..HS-1.
template <int64_t NV>
[[gnu::noinline]] void rows_times_tile_v(Block& S, const float* const x[kRows], const float* tile,
                                         int64_t HS) {
  vf16 acc[kRows][kV] = {};  // 16 registers
  for (int64_t d = 0; d < HS; d++) {
    vf16 col[NV];  // row d of the tile
    for (int64_t v = 0; v < NV; v++) {
      col[v] = load16(tile + d * kBlock + 16 * v);
      pin(col[v]);
    }
    for (int64_t r = 0; r < kRows; r++) {
      const float xd = x[r][d];
      for (int64_t v = 0; v < NV; v++) acc[r][v] += xd * col[v];
    }
  }
  for (int64_t r = 0; r < kRows; r++)
    for (int64_t v = 0; v < kV; v++) store16(&S[r][16 * v], acc[r][v]);
}

// The number of 16-key vectors that hold keys 0..keys-1 of a tile. On and
// under the causal diagonal a row group needs only the keys up to its last
// row; the products of later keys would be masked (forward) or multiplied
// by a zero probability (backward), and adding those zeros to sums that
// start at +0 changes no bit, so the tile loops skip them.
inline int64_t key_vectors(int64_t keys) { return std::clamp<int64_t>((keys + 15) / 16, 1, kV); }

// f(std::integral_constant<int64_t, NV>{}) for NV = key_vectors(keys): each
// vector count of a tile loop is its own unrolled instance.
template <class F>
void with_key_vectors(int64_t keys, F&& f) {
  static_assert(kV == 4, "one case per vector count");
  switch (key_vectors(keys)) {
    case 1: return f(std::integral_constant<int64_t, 1>{});
    case 2: return f(std::integral_constant<int64_t, 2>{});
    case 3: return f(std::integral_constant<int64_t, 3>{});
    default: return f(std::integral_constant<int64_t, 4>{});
  }
}

// rows_times_tile_v for the tile's first `keys` keys.
inline void rows_times_tile(Block& S, const float* const x[kRows], const float* tile, int64_t HS,
                            int64_t keys) {
  with_key_vectors(keys, [&](auto nv) { rows_times_tile_v<decltype(nv)::value>(S, x, tile, HS); });
}

// dst (n) = scale * src (n): a q row scaled once for all its key tiles.
inline void scaled_row(float* dst, const float* src, int64_t n, float scale) {
#pragma omp simd
  for (int64_t d = 0; d < n; d++) dst[d] = src[d] * scale;
}

// A (kRows, HSP) += P (kRows, kBlock) @ M (kBlock, HSP), keys 0..nk-1 in order.
[[gnu::noinline]] void block_times_rows(float* A, const Block& P, const float* M, int64_t HSP, int64_t nk) {
  for (int64_t d0 = 0; d0 < HSP; d0 += kBlock) {
    vf16 acc[kRows][kV];  // 16 registers
    for (int64_t r = 0; r < kRows; r++)
      for (int64_t v = 0; v < kV; v++) acc[r][v] = load16(A + r * HSP + d0 + 16 * v);
    for (int64_t j = 0; j < nk; j++) {
      vf16 m[kV];  // (kBlock) chunk of key/value row j
      for (int64_t v = 0; v < kV; v++) {
        m[v] = load16(M + j * HSP + d0 + 16 * v);
        pin(m[v]);
      }
      for (int64_t r = 0; r < kRows; r++) {
        const float pj = P[r][j];
        for (int64_t v = 0; v < kV; v++) acc[r][v] += pj * m[v];
      }
    }
    for (int64_t r = 0; r < kRows; r++)
      for (int64_t v = 0; v < kV; v++) store16(A + r * HSP + d0 + 16 * v, acc[r][v]);
  }
}

// Mt (HS, kBlock) += X^T (HS, R) @ P (R, kBlock), rows r = 0..R-1 of x
// (HS each) and p (kBlock each): the gradient of a key or value tile, held
// transposed, over the keys in the first NV vectors. Element (d, j) takes
// x_r[d] * p_r[j] for r = 0..R-1 in order, as a row-major (kBlock, HS) tile
// would, but here a vector runs along the keys, so four rows of Mt are
// sixteen independent accumulators, loaded and stored once for all R rows
// (the backward passes two row groups, R = 2 kRows, so that load and store
// is half as frequent).
template <int64_t NV, int64_t R>
[[gnu::noinline]] void rows_t_times_block_v(float* Mt, const float* const x[R],
                                            const float* const p[R], int64_t HS) {
  constexpr int64_t kD = 4;  // rows of Mt a pass: 16 accumulators
  int64_t d0 = 0;
  for (; d0 + kD <= HS; d0 += kD) {
    vf16 acc[kD][NV];
    for (int64_t e = 0; e < kD; e++)
      for (int64_t v = 0; v < NV; v++) acc[e][v] = load16(Mt + (d0 + e) * kBlock + 16 * v);
    for (int64_t r = 0; r < R; r++) {
      vf16 pr[NV];  // row r of P
      for (int64_t v = 0; v < NV; v++) {
        pr[v] = load16(p[r] + 16 * v);
        pin(pr[v]);
      }
      for (int64_t e = 0; e < kD; e++) {
        const float xd = x[r][d0 + e];
        for (int64_t v = 0; v < NV; v++) acc[e][v] += xd * pr[v];
      }
    }
    for (int64_t e = 0; e < kD; e++)
      for (int64_t v = 0; v < NV; v++) store16(Mt + (d0 + e) * kBlock + 16 * v, acc[e][v]);
  }
  for (; d0 < HS; d0++) {  // HS % kD rows left
    float* m = Mt + d0 * kBlock;  // (kBlock)
    for (int64_t r = 0; r < R; r++) {
      const float xd = x[r][d0];
#pragma omp simd
      for (int64_t j = 0; j < 16 * NV; j++) m[j] += xd * p[r][j];
    }
  }
}

// rows_t_times_block_v for the tile's first `keys` keys (the later ones'
// probabilities are 0: see key_vectors).
template <int64_t R>
void rows_t_times_block(float* Mt, const float* const x[R], const float* const p[R], int64_t HS,
                        int64_t keys) {
  with_key_vectors(keys,
                   [&](auto nv) { rows_t_times_block_v<decltype(nv)::value, R>(Mt, x, p, HS); });
}

// The attention-probability dropout of one call: off (p = 0 or no site),
// or the site's Philox stream. mask() fills Z (kRows, kBlock) = mask / (1-p)
// for query rows irow[r] of local head h and keys j0.. of local sequence b:
// keep_scale where kept, 0 where dropped. out = (P * Z) v. The backward
// needs nothing else: dV = (P * Z)^T dO, dP = (dO v^T) * Z, and D_i = dO_i .
// out_i still equals sum_j P_ij dP_ij.
struct ProbDropout {
  bool on;
  DropoutStream st;
  float keep_scale;
  int64_t head0, first_sample;

  explicit ProbDropout(const DropoutSite* drop)
      : on(drop != nullptr && drop->active()),
        st(on ? *drop : DropoutSite{}),
        keep_scale(on ? drop->keep_scale() : 1.0f),
        head0(on ? drop->head0 : 0),
        first_sample(on ? drop->first_sample : 0) {}

  void mask(Block& Z, const int64_t irow[kRows], int64_t j0, int64_t h, int64_t b,
            int64_t T) const {
    uint32_t bits[kBlock];
    for (int64_t r = 0; r < kRows; r++) {
      dropout_bits(st, first_sample + b, attention_prob_element(head0 + h, irow[r], j0, T),
                   kBlock, bits);
#pragma omp simd
      for (int64_t j = 0; j < kBlock; j++) Z[r][j] = bits[j] >= st.threshold ? keep_scale : 0.0f;
    }
  }
};

void check_shape(int64_t C, int64_t NH) {
  TESSERA_CHECK(NH > 0 && C % NH == 0, "attention: width {} is not divisible by {} heads", C, NH);
}

void check_heads(const AttentionHeads& hd) {
  TESSERA_CHECK(hd.q_heads > 0 && hd.kv_heads > 0 && hd.head_size > 0,
                "attention: {} query heads, {} key/value heads of size {}", hd.q_heads,
                hd.kv_heads, hd.head_size);
  TESSERA_CHECK(hd.q_heads % hd.kv_heads == 0,
                "attention: {} query heads are not divisible by {} key/value heads", hd.q_heads,
                hd.kv_heads);
  TESSERA_CHECK(!hd.rope() || (hd.head_size % 2 == 0 && hd.head_size <= kMaxRopeHead),
                "attention: rotary embedding needs an even head size of at most {}, not {}",
                kMaxRopeHead, hd.head_size);
}

// The call's RoPE table (null: none), built or found once per call.
std::optional<Rope> rope_of(const AttentionHeads& hd, int64_t T) {
  if (!hd.rope()) return std::nullopt;
  return Rope{rope_table(T, hd.head_size, hd.rope_base)};
}

template <class St>
void attention_forward_as(typename St::T* out, float* lse, const typename St::T* qkv, int64_t B,
                          int64_t T, const AttentionHeads& hd, const DropoutSite* drop) {
  check_heads(hd);
  const ProbDropout pdrop(drop);
  const bool dropout = pdrop.on;
  // C: out's row width (the query heads); W: qkv's row width. Plain MHA: W = 3 C.
  const int64_t NH = hd.q_heads, KVH = hd.kv_heads, HS = hd.head_size, HSP = padded(HS);
  const int64_t C = hd.q_width(), W = hd.qkv_width(), group = hd.group();
  const float scale = 1.0f / std::sqrt(float(HS));
  const int64_t nqb = (T + kBlock - 1) / kBlock;
  const std::optional<Rope> rope_call = rope_of(hd, T);
  const Rope* rope = rope_call ? &*rope_call : nullptr;
  // Every query tile of a head reads the same key and value tiles: they are
  // transposed (rotated) and widened once per call, not once per query tile.
  // The scratch is kept between calls (a fresh allocation of this size costs
  // page faults on every layer) by the calling thread.
  const int64_t ktile = HS * kBlock, vtile_size = kBlock * HSP;  // floats a tile
  thread_local std::vector<float> kv_scratch;
  const size_t kv_floats = size_t(B * KVH * nqb * (ktile + vtile_size));
  if (kv_scratch.size() < kv_floats) kv_scratch.resize(kv_floats);
  float* const ktiles = kv_scratch.data();                   // (B, KVH, nqb, HS, kBlock) K^T tiles
  float* const vtiles = ktiles + B * KVH * nqb * ktile;      // (B, KVH, nqb, kBlock, HSP) V tiles
  auto tile_index = [&](int64_t b, int64_t kvh, int64_t t) { return (b * KVH + kvh) * nqb + t; };

#pragma omp parallel
  {
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; b++) {
      for (int64_t kvh = 0; kvh < KVH; kvh++) {
        for (int64_t t = 0; t < nqb; t++) {
          const int64_t j0 = t * kBlock, nk = std::min(T, j0 + kBlock) - j0;
          const typename St::T* kbase = qkv + b * T * W + C + kvh * HS;  // row t at + t * W
          const typename St::T* vbase = kbase + KVH * HS;
          const int64_t at = tile_index(b, kvh, t);
          load_transposed<St>(ktiles + at * ktile, kbase, j0, nk, HS, W, rope);
          load_rows<St>(vtiles + at * vtile_size, vbase, j0, nk, HS, HSP, W);
        }
      }
    }  // (the implicit barrier: every tile is ready)

    std::vector<float> acc(kBlock * HSP);   // (kBlock, HSP) unnormalized output rows
    std::vector<float> qtile(kBlock * HS);  // (kBlock, HS) the tile's q rows widened, rotated, scaled
    float mrow[kBlock], lrow[kBlock];       // running max and running sum per query row
    Block S;                                // scores, then probabilities, of kRows rows
    Block Z;                                // dropout only: mask / (1-p)

    // Later query tiles see more keys; dynamic scheduling from the last tile
    // down keeps the threads busy. Each (b, h, tile) is computed by one thread
    // in a fixed order, so the result does not depend on the schedule.
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
      for (int64_t h = 0; h < NH; h++) {
        for (int64_t qbr = 0; qbr < nqb; qbr++) {
          const int64_t i0 = (nqb - 1 - qbr) * kBlock, i1 = std::min(T, i0 + kBlock);
          const typename St::T* qbase = qkv + b * T * W + h * HS;  // row t at + t * W
          std::fill(acc.begin(), acc.end(), 0.0f);
          std::fill(mrow, mrow + kBlock, -std::numeric_limits<float>::infinity());
          std::fill(lrow, lrow + kBlock, 0.0f);
          // The tile's q rows widened (and rotated) and scaled once, for all
          // its key tiles.
          for (int64_t i = i0; i < i1; i++) {
            if (i + kAhead < i1) prefetch_row(qbase + (i + kAhead) * W, HS);
            float* qi = qtile.data() + (i - i0) * HS;  // (HS)
            load_row<St>(qi, qbase + i * W, HS, rope, i);
            scaled_row(qi, qi, HS, scale);
          }

          for (int64_t j0 = 0; j0 <= i0; j0 += kBlock) {  // causal: tiles up to the diagonal
            const int64_t nk = std::min(T, j0 + kBlock) - j0;
            const int64_t at = tile_index(b, h / group, j0 / kBlock);
            const float* kt = ktiles + at * ktile;        // (HS, kBlock)
            const float* vtile = vtiles + at * vtile_size; // (kBlock, HSP)
            for (int64_t g = i0; g < i1; g += kRows) {
              // Rows past i1 repeat the last row; their results land in
              // unused accumulator rows and are never written out.
              int64_t irow[kRows];
              const float* q[kRows];
              for (int64_t r = 0; r < kRows; r++) {
                irow[r] = std::min(g + r, i1 - 1);
                q[r] = qtile.data() + (irow[r] - i0) * HS;
              }
              // Keys of this tile at or before the group's last row (key_vectors).
              const int64_t keys = std::min(nk, irow[kRows - 1] - j0 + 1);
              rows_times_tile(S, q, kt, HS, keys);
              for (int64_t r = 0; r < kRows; r++) {
                const int64_t a = g + r - i0;                      // accumulator row
                const int64_t jlim = std::min(nk, irow[r] - j0 + 1);  // keys <= i in this tile
                // Mask keys past the diagonal (and past T) first: a select
                // inside the max reduction does not vectorize.
#pragma omp simd
                for (int64_t j = 0; j < kBlock; j++)
                  S[r][j] = j < jlim ? S[r][j] : -std::numeric_limits<float>::infinity();
                float mb = mrow[a];
#pragma omp simd reduction(max : mb)
                for (int64_t j = 0; j < kBlock; j++) mb = std::max(mb, S[r][j]);
                // Rescale what was accumulated under the old max (exp(-inf) = 0 at first).
                const float corr = std::exp(mrow[a] - mb);
                float ps = 0.0f;
#pragma omp simd reduction(+ : ps)
                for (int64_t j = 0; j < kBlock; j++) {
                  S[r][j] = j < jlim ? exp_fast(S[r][j] - mb) : 0.0f;
                  ps += S[r][j];
                }
                mrow[a] = mb;
                lrow[a] = lrow[a] * corr + ps;
                float* ar = acc.data() + a * HSP;  // (HSP)
#pragma omp simd
                for (int64_t d = 0; d < HSP; d++) ar[d] *= corr;
              }
              // The normaliser lrow sums the probabilities before dropout;
              // only the product with v sees the mask.
              if (dropout) {
                pdrop.mask(Z, irow, j0, h, b, T);
                for (int64_t r = 0; r < kRows; r++)
#pragma omp simd
                  for (int64_t j = 0; j < kBlock; j++) S[r][j] *= Z[r][j];
              }
              block_times_rows(acc.data() + (g - i0) * HSP, S, vtile, HSP, keys);
            }
          }

          for (int64_t i = i0; i < i1; i++) {
            const int64_t a = i - i0;
            typename St::T* o = out + (b * T + i) * C + h * HS;  // (HS)
            const float* ar = acc.data() + a * HSP;     // (HSP)
            const float inv = 1.0f / lrow[a];
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) o[d] = St::store(ar[d] * inv);
            lse[(b * NH + h) * T + i] = mrow[a] + std::log(lrow[a]);
          }
        }
      }
    }
  }
}

// dqkv is stored like qkv: under --bf16 / --fp16 it is the qkv GEMM's
// backward operand, so each element is rounded once here from its fp32 sum
// (dq through an fp32 accumulator per head, dk and dv from their tiles)
// instead of being written in fp32 and cast.
//
// Under RoPE the tiles hold rotated q and k, so the sums give the
// gradients of the rotated values; dk is turned back (the transpose of the
// rotation) as its tile is stored, dq once its sums are complete.
template <class St>
void attention_backward_as(typename St::T* dqkv, const float* dout, const typename St::T* qkv,
                           const typename St::T* out, const float* lse, int64_t B, int64_t T,
                           const AttentionHeads& hd, const DropoutSite* drop) {
  constexpr bool kFp32 = std::is_same_v<St, StoreF32>;
  check_heads(hd);
  const ProbDropout pdrop(drop);
  const bool dropout = pdrop.on;
  // C: out's row width (the query heads); W: qkv's row width. Plain MHA: W = 3 C.
  const int64_t NH = hd.q_heads, KVH = hd.kv_heads, HS = hd.head_size, HSP = padded(HS);
  const int64_t C = hd.q_width(), W = hd.qkv_width(), group = hd.group();
  const float scale = 1.0f / std::sqrt(float(HS));
  const std::optional<Rope> rope_call = rope_of(hd, T);
  const Rope* rope = rope_call ? &*rope_call : nullptr;

  // One (b, kv head) per task: its key/value tiles collect the gradients of
  // every query head of its group, and dq rows collect contributions from
  // every key tile, so a task that owns the whole group writes dq, dk and
  // dv without races and sums in a fixed order (plain MHA: one head per
  // task, as before GQA). B * KVH is normally >= the number of cores.
#pragma omp parallel
  {
    std::vector<float> kt(HS * kBlock);     // (HS, kBlock) key tile, transposed
    std::vector<float> vt(HS * kBlock);     // (HS, kBlock) value tile, transposed
    std::vector<float> krows(kBlock * HSP); // (kBlock, HSP) key tile, row-major
    std::vector<float> dkt(HS * kBlock);    // (HS, kBlock) gradient of the key tile, transposed
    std::vector<float> dvt(HS * kBlock);    // (HS, kBlock) gradient of the value tile, transposed
    std::vector<float> row(HSP);            // (HSP) one row of dk or dv on its way out
    std::vector<float> dqg(kRows * HSP);    // (kRows, HSP) the group's dq from this tile
    std::vector<float> D(group * T);        // (group, T) D_i = dout_i . out_i per query head
    std::vector<float> ow(HS);              // (HS) 16-bit storage: one out row widened
    // The task's query rows are visited once per key tile: gathered once,
    // contiguous, widened and rotated (qrows) and scaled (qscaled), and dq
    // summed here (contiguous, not strided through dqkv) and written at the
    // end. Each value is the one a per-tile load would form.
    std::vector<float> qrows(group * T * HS);    // (group, T, HS)
    std::vector<float> qscaled(group * T * HS);  // (group, T, HS)
    std::vector<float> dqacc(group * T * HS);    // (group, T, HS) dq sums
    // Two row groups' probabilities (P, then dP -> dS) and, under dropout,
    // P * Z: dK and dV take both groups in one pass (rows_t_times_block).
    Block Pb[2], dSb[2], PZb[2];
    Block Z;                                // dropout only: mask / (1-p)

#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
      for (int64_t kvh = 0; kvh < KVH; kvh++) {
        const typename St::T* kbase = qkv + b * T * W + C + kvh * HS;  // row t at + t * W
        const typename St::T* vbase = kbase + KVH * HS;
        typename St::T* dkbase = dqkv + b * T * W + C + kvh * HS;
        typename St::T* dvbase = dkbase + KVH * HS;
        // Query head h = kvh * group + m, m < group: its rows of q, dout
        // and out (row t at + t * W, + t * C, + t * C), and of the task's
        // buffers (row t at + t * HS).
        auto qbase = [&](int64_t m) { return qkv + b * T * W + (kvh * group + m) * HS; };
        auto dobase = [&](int64_t m) { return dout + b * T * C + (kvh * group + m) * HS; };
        auto obase = [&](int64_t m) { return out + b * T * C + (kvh * group + m) * HS; };
        auto task_row = [&](std::vector<float>& buf, int64_t m, int64_t t) {
          return buf.data() + (m * T + t) * HS;
        };

        // dS = P * (dP - D) with D_i = sum_j P_ij dP_ij = dout_i . out_i,
        // which needs no pass over the keys.
        for (int64_t m = 0; m < group; m++) {
          for (int64_t i = 0; i < T; i++) {
            if (i + kAhead < T) {  // the rows of q, dout and out read below
              prefetch_row(dobase(m) + (i + kAhead) * C, HS);
              prefetch_row(obase(m) + (i + kAhead) * C, HS);
              prefetch_row(qbase(m) + (i + kAhead) * W, HS);
            }
            const float* dO = dobase(m) + i * C;
            // 16-bit out: widened first, so the reduction below is the fp32
            // kernel's loop (a widening load inside it could vectorise, and so
            // sum, in another order).
            const float* o;
            if constexpr (kFp32) {
              o = obase(m) + i * C;
            } else {
              load_row<St>(ow.data(), obase(m) + i * C, HS);
              o = ow.data();
            }
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t d = 0; d < HS; d++) acc += dO[d] * o[d];
            D[m * T + i] = acc;
            float* dq = task_row(dqacc, m, i);
            std::fill(dq, dq + HS, 0.0f);  // written, not accumulated
            float* qi = task_row(qrows, m, i);
            load_row<St>(qi, qbase(m) + i * W, HS, rope, i);
            scaled_row(task_row(qscaled, m, i), qi, HS, scale);
          }
        }

        for (int64_t j0 = 0; j0 < T; j0 += kBlock) {
          const int64_t nk = std::min(T, j0 + kBlock) - j0;
          load_transposed<St>(kt.data(), kbase, j0, nk, HS, W, rope);
          load_transposed<St>(vt.data(), vbase, j0, nk, HS, W);
          load_rows<St>(krows.data(), kbase, j0, nk, HS, HSP, W, rope);
          std::fill(dkt.begin(), dkt.end(), 0.0f);
          std::fill(dvt.begin(), dvt.end(), 0.0f);

          for (int64_t m = 0; m < group; m++) {
            const int64_t h = kvh * group + m;  // local query head (the dropout mask's)
            const float* L = lse + (b * NH + h) * T;  // (T)
            const float* Dm = D.data() + m * T;       // (T)
            // The groups waiting for their dK, dV update: their rows of dO, q,
            // of P (P * Z under dropout) and dS, in order, and the keys of the
            // later one (which covers the earlier one's).
            int64_t pending = 0, pending_keys = 0;
            const float* px_do[2 * kRows];
            const float* px_q[2 * kRows];
            const float* pp[2 * kRows];
            const float* pds[2 * kRows];
            auto update_dk_dv = [&] {
              if (pending == 2) {
                rows_t_times_block<2 * kRows>(dvt.data(), px_do, pp, HS, pending_keys);   // dV^T += dO^T (P*Z)
                rows_t_times_block<2 * kRows>(dkt.data(), px_q, pds, HS, pending_keys);   // dK^T += Q^T dS
              } else if (pending == 1) {
                rows_t_times_block<kRows>(dvt.data(), px_do, pp, HS, pending_keys);
                rows_t_times_block<kRows>(dkt.data(), px_q, pds, HS, pending_keys);
              }
              pending = 0;
            };
            for (int64_t g = j0; g < T; g += kRows) {  // causal: only queries i >= j0
              Block& P = Pb[pending];
              Block& dS = dSb[pending];
              Block& PZ = PZb[pending];
              // Rows past T repeat row T-1 with no keys, so they add nothing.
              int64_t irow[kRows], jlim[kRows];
              const float* q[kRows];   // (HS) rows of the group's q
              const float* qsc[kRows]; // (HS) the same, scaled
              const float* dO[kRows];  // (HS) rows of dout
              for (int64_t r = 0; r < kRows; r++) {
                irow[r] = std::min(g + r, T - 1);
                jlim[r] = g + r < T ? std::min(nk, irow[r] - j0 + 1) : 0;
                dO[r] = dobase(m) + irow[r] * C;
                q[r] = task_row(qrows, m, irow[r]);
                qsc[r] = task_row(qscaled, m, irow[r]);
              }
              // Keys of this tile at or before the group's last row (key_vectors).
              const int64_t keys = std::min(nk, irow[kRows - 1] - j0 + 1);
              // Recompute P_ij = exp(s_ij - lse_i) from the saved row log-sum-exp.
              rows_times_tile(P, qsc, kt.data(), HS, keys);
              rows_times_tile(dS, dO, vt.data(), HS, keys);  // dP = dout . v
              if (!dropout) {
                for (int64_t r = 0; r < kRows; r++) {
                  const float Li = L[irow[r]], Di = Dm[irow[r]];
                  const int64_t lim = jlim[r];
#pragma omp simd
                  for (int64_t j = 0; j < kBlock; j++) {
                    P[r][j] = j < lim ? exp_fast(P[r][j] - Li) : 0.0f;
                    dS[r][j] = P[r][j] * (dS[r][j] - Di) * scale;  // includes d(s)/d(qk) = scale
                  }
                }
              } else {
                // Z = mask / (1-p): out = (P*Z) v, so dV = (P*Z)^T dO and
                // dP = (dO v^T) * Z before the softmax backward.
                for (int64_t r = 0; r < kRows; r++) {
                  const float Li = L[irow[r]];
                  const int64_t lim = jlim[r];
#pragma omp simd
                  for (int64_t j = 0; j < kBlock; j++)
                    P[r][j] = j < lim ? exp_fast(P[r][j] - Li) : 0.0f;
                }
                pdrop.mask(Z, irow, j0, h, b, T);
                for (int64_t r = 0; r < kRows; r++) {
                  const float Di = Dm[irow[r]];
#pragma omp simd
                  for (int64_t j = 0; j < kBlock; j++) {
                    PZ[r][j] = P[r][j] * Z[r][j];
                    dS[r][j] = P[r][j] * (dS[r][j] * Z[r][j] - Di) * scale;
                  }
                }
              }
              for (int64_t r = 0; r < kRows; r++) {
                px_do[pending * kRows + r] = dO[r];
                px_q[pending * kRows + r] = q[r];
                pp[pending * kRows + r] = dropout ? PZ[r] : P[r];
                pds[pending * kRows + r] = dS[r];
              }
              pending_keys = keys;
              if (++pending == 2) update_dk_dv();
              std::fill(dqg.begin(), dqg.end(), 0.0f);
              block_times_rows(dqg.data(), dS, krows.data(), HSP, keys);  // dQ = dS K
              for (int64_t r = 0; r < kRows && g + r < T; r++) {
                float* dq = task_row(dqacc, m, g + r);  // (HS)
                const float* src = dqg.data() + r * HSP;
#pragma omp simd
                for (int64_t d = 0; d < HS; d++) dq[d] += src[d];
              }
            }
            update_dk_dv();  // an odd group left
          }

          for (int64_t j = 0; j < nk; j++) {
            for (int64_t d = 0; d < HS; d++) row[d] = dkt[d * kBlock + j];
            if (rope) rope->unrotate(row.data(), j0 + j);
            store_row<St>(dkbase + (j0 + j) * W, row.data(), HS);
            for (int64_t d = 0; d < HS; d++) row[d] = dvt[d * kBlock + j];
            store_row<St>(dvbase + (j0 + j) * W, row.data(), HS);
          }
        }
        for (int64_t m = 0; m < group; m++) {
          for (int64_t i = 0; i < T; i++) {
            float* dq = task_row(dqacc, m, i);  // (HS) complete: every key tile added
            if (rope) rope->unrotate(dq, i);
            store_row<St>(dqkv + b * T * W + (kvh * group + m) * HS + i * W, dq, HS);
          }
        }
      }
    }
  }
}

}  // namespace

int64_t attention_dropout_draws(int64_t T, bool forward) {
  // Rows of a group past the end repeat the last row, and draw with it.
  auto groups_of = [](int64_t rows) { return (rows + kRows - 1) / kRows * kRows; };
  int64_t draws = 0;
  for (int64_t t = 0; t * kBlock < T; t++) {
    if (forward)  // query block t: kBlock rows at most, against key tiles 0..t
      draws += (t + 1) * groups_of(std::min(kBlock, T - t * kBlock)) * kBlock;
    else  // key tile t: every query from its first key on
      draws += groups_of(T - t * kBlock) * kBlock;
  }
  return draws;
}

// GPT-2's heads: C / NH each, the old (C, NH) entry points.
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                       int64_t C, int64_t NH, const DropoutSite* drop) {
  check_shape(C, NH);
  attention_forward_as<StoreF32>(out, lse, qkv, B, T, AttentionHeads::mha(C, NH), drop);
}
void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B, int64_t T,
                            int64_t C, int64_t NH, const DropoutSite* drop) {
  check_shape(C, NH);
  attention_forward_as<StoreBf16>(out, lse, qkv, B, T, AttentionHeads::mha(C, NH), drop);
}
void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B, int64_t T,
                            int64_t C, int64_t NH, const DropoutSite* drop) {
  check_shape(C, NH);
  attention_forward_as<StoreFp16>(out, lse, qkv, B, T, AttentionHeads::mha(C, NH), drop);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH,
                        const DropoutSite* drop) {
  check_shape(C, NH);
  attention_backward_as<StoreF32>(dqkv, dout, qkv, out, lse, B, T, AttentionHeads::mha(C, NH),
                                  drop);
}
void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                             const bf16_t* out, const float* lse, int64_t B, int64_t T, int64_t C,
                             int64_t NH, const DropoutSite* drop) {
  check_shape(C, NH);
  attention_backward_as<StoreBf16>(dqkv, dout, qkv, out, lse, B, T, AttentionHeads::mha(C, NH),
                                   drop);
}
void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                             const fp16_t* out, const float* lse, int64_t B, int64_t T, int64_t C,
                             int64_t NH, const DropoutSite* drop) {
  check_shape(C, NH);
  attention_backward_as<StoreFp16>(dqkv, dout, qkv, out, lse, B, T, AttentionHeads::mha(C, NH),
                                   drop);
}

// Any heads: GQA and RoPE.
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                       const AttentionHeads& heads, const DropoutSite* drop) {
  attention_forward_as<StoreF32>(out, lse, qkv, B, T, heads, drop);
}
void attention_forward_bf16(bf16_t* out, float* lse, const bf16_t* qkv, int64_t B, int64_t T,
                            const AttentionHeads& heads, const DropoutSite* drop) {
  attention_forward_as<StoreBf16>(out, lse, qkv, B, T, heads, drop);
}
void attention_forward_fp16(fp16_t* out, float* lse, const fp16_t* qkv, int64_t B, int64_t T,
                            const AttentionHeads& heads, const DropoutSite* drop) {
  attention_forward_as<StoreFp16>(out, lse, qkv, B, T, heads, drop);
}
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, const AttentionHeads& heads,
                        const DropoutSite* drop) {
  attention_backward_as<StoreF32>(dqkv, dout, qkv, out, lse, B, T, heads, drop);
}
void attention_backward_bf16(bf16_t* dqkv, const float* dout, const bf16_t* qkv,
                             const bf16_t* out, const float* lse, int64_t B, int64_t T,
                             const AttentionHeads& heads, const DropoutSite* drop) {
  attention_backward_as<StoreBf16>(dqkv, dout, qkv, out, lse, B, T, heads, drop);
}
void attention_backward_fp16(fp16_t* dqkv, const float* dout, const fp16_t* qkv,
                             const fp16_t* out, const float* lse, int64_t B, int64_t T,
                             const AttentionHeads& heads, const DropoutSite* drop) {
  attention_backward_as<StoreFp16>(dqkv, dout, qkv, out, lse, B, T, heads, drop);
}

void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                      int64_t len, int64_t C, int64_t NH) {
  check_shape(C, NH);
  attention_decode(out, q, k_cache, v_cache, len, AttentionHeads::mha(C, NH));
}

void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                      int64_t len, const AttentionHeads& hd) {
  check_heads(hd);
  TESSERA_CHECK(len > 0, "attention_decode: empty KV cache");
  const int64_t NH = hd.q_heads, HS = hd.head_size, KVW = hd.kv_width(), group = hd.group();
  const float scale = 1.0f / std::sqrt(float(HS));
  // The query's angles (position len-1), once for every head.
  std::vector<float> rc(hd.rope() ? HS / 2 : 0), rs(rc.size());  // (HS/2) cos, sin
  if (hd.rope()) rope_angles(rc.data(), rs.data(), len - 1, HS, hd.rope_base);

  // One query row per head: a plain (not online) softmax over len scores is
  // cheapest; threads split the heads when there is enough work.
#pragma omp parallel for schedule(static) if (NH * len * HS > (1 << 16))
  for (int64_t h = 0; h < NH; h++) {
    std::vector<float> s(len);     // (len) scores, then probabilities
    std::vector<float> qr;         // (HS) RoPE: the query head rotated
    const float* qh = q + h * HS;  // (HS)
    if (hd.rope()) {
      qr.assign(qh, qh + HS);
      rope_rotate(qr.data(), rc.data(), rs.data(), HS / 2);
      qh = qr.data();
    }
    const int64_t g = h / group;  // kv head
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < len; t++) {
      const float* k = k_cache + t * KVW + g * HS;  // (HS)
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t d = 0; d < HS; d++) acc += qh[d] * k[d];
      s[t] = acc * scale;
      m = std::max(m, s[t]);
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t t = 0; t < len; t++) {
      s[t] = exp_fast(s[t] - m);
      sum += s[t];
    }
    float* o = out + h * HS;  // (HS)
#pragma omp simd
    for (int64_t d = 0; d < HS; d++) o[d] = 0.0f;
    for (int64_t t = 0; t < len; t++) {
      const float pt = s[t];
      const float* v = v_cache + t * KVW + g * HS;  // (HS)
#pragma omp simd
      for (int64_t d = 0; d < HS; d++) o[d] += pt * v[d];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t d = 0; d < HS; d++) o[d] *= inv;
  }
}

}  // namespace tessera::cpu
