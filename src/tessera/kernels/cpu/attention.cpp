// Causal multi-head attention, flash style: queries and keys are visited in
// blocks with an online softmax, so memory is O(block * HS) per thread and the
// (T, T) score matrix never exists.
#include "tessera/kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/vec_math.h"

namespace tessera::cpu {

namespace {

// 64 x 64 fp32 tiles: a transposed key tile (16 KiB) plus a 64-row output
// accumulator (16 KiB at HS = 64) stay in L1/L2 while a query block streams.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 64;

// Copies rows [j0, j0 + nk) of one head's k (or v) into dst (HS, kBlockK),
// transposed, so score loops run contiguously over keys (simd over j, no
// horizontal sums).
void load_transposed(float* dst, const float* src, int64_t j0, int64_t nk, int64_t HS,
                     int64_t row_stride) {
  for (int64_t j = 0; j < nk; j++) {
    const float* row = src + (j0 + j) * row_stride;  // (HS)
    for (int64_t d = 0; d < HS; d++) dst[d * kBlockK + j] = row[d];
  }
}

// s (nj) = scale * x (HS) . tile columns (HS, kBlockK).
inline void row_times_tile(float* s, const float* x, const float* tile, int64_t nj, int64_t HS,
                           float scale) {
#pragma omp simd
  for (int64_t j = 0; j < nj; j++) s[j] = 0.0f;
  for (int64_t d = 0; d < HS; d++) {
    const float xd = x[d] * scale;
    const float* col = tile + d * kBlockK;  // (kBlockK)
#pragma omp simd
    for (int64_t j = 0; j < nj; j++) s[j] += xd * col[j];
  }
}

void check_shape(int64_t C, int64_t NH) {
  TESSERA_CHECK(NH > 0 && C % NH == 0, "attention: width {} is not divisible by {} heads", C, NH);
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                       int64_t C, int64_t NH) {
  check_shape(C, NH);
  const int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(HS));
  const int64_t nqb = (T + kBlockQ - 1) / kBlockQ;

#pragma omp parallel
  {
    std::vector<float> kt(HS * kBlockK);   // (HS, kBlockK) key tile, transposed
    std::vector<float> acc(kBlockQ * HS);  // (kBlockQ, HS) unnormalized output rows
    float mrow[kBlockQ], lrow[kBlockQ];    // running max and running sum per query row
    float s[kBlockK];                      // (kBlockK) scores, then probabilities, of one row

    // Later query blocks see more keys; dynamic scheduling from the last block
    // down keeps the two threads busy. Each (b, h, block) is computed by one
    // thread in a fixed order, so the result does not depend on the schedule.
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
      for (int64_t h = 0; h < NH; h++) {
        for (int64_t qbr = 0; qbr < nqb; qbr++) {
          const int64_t i0 = (nqb - 1 - qbr) * kBlockQ, i1 = std::min(T, i0 + kBlockQ);
          const float* qbase = qkv + b * T * C3 + h * HS;   // row t at + t * C3
          const float* kbase = qbase + C;
          const float* vbase = qbase + 2 * C;
          std::fill(acc.begin(), acc.end(), 0.0f);
          std::fill(mrow, mrow + kBlockQ, -std::numeric_limits<float>::infinity());
          std::fill(lrow, lrow + kBlockQ, 0.0f);

          for (int64_t j0 = 0; j0 < i1; j0 += kBlockK) {  // causal: keys up to i1 - 1
            const int64_t j1 = std::min(i1, j0 + kBlockK);
            load_transposed(kt.data(), kbase, j0, j1 - j0, HS, C3);
            for (int64_t i = std::max(i0, j0); i < i1; i++) {
              const int64_t nj = std::min(j1, i + 1) - j0;  // keys j0 .. i inside this tile
              const int64_t r = i - i0;
              row_times_tile(s, qbase + i * C3, kt.data(), nj, HS, scale);
              float mb = mrow[r];
#pragma omp simd reduction(max : mb)
              for (int64_t j = 0; j < nj; j++) mb = std::max(mb, s[j]);
              // Rescale what was accumulated under the old max (exp(-inf) = 0 first time).
              const float corr = std::exp(mrow[r] - mb);
              float ps = 0.0f;
#pragma omp simd reduction(+ : ps)
              for (int64_t j = 0; j < nj; j++) {
                s[j] = exp_fast(s[j] - mb);
                ps += s[j];
              }
              mrow[r] = mb;
              lrow[r] = lrow[r] * corr + ps;
              float* a = acc.data() + r * HS;  // (HS)
#pragma omp simd
              for (int64_t d = 0; d < HS; d++) a[d] *= corr;
              for (int64_t j = 0; j < nj; j++) {
                const float pj = s[j];
                const float* v = vbase + (j0 + j) * C3;  // (HS)
#pragma omp simd
                for (int64_t d = 0; d < HS; d++) a[d] += pj * v[d];
              }
            }
          }

          for (int64_t i = i0; i < i1; i++) {
            const int64_t r = i - i0;
            float* o = out + (b * T + i) * C + h * HS;  // (HS)
            const float* a = acc.data() + r * HS;       // (HS)
            const float inv = 1.0f / lrow[r];
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) o[d] = a[d] * inv;
            lse[(b * NH + h) * T + i] = mrow[r] + std::log(lrow[r]);
          }
        }
      }
    }
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH) {
  check_shape(C, NH);
  const int64_t HS = C / NH, C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(float(HS));

  // One (b, h) per task: dq rows collect contributions from every key block,
  // so a task that owns the whole head writes dq, dk and dv without races
  // and sums in a fixed order. B * NH is normally >= the 2 cores.
#pragma omp parallel
  {
    std::vector<float> kt(HS * kBlockK);  // (HS, kBlockK) key tile, transposed
    std::vector<float> vt(HS * kBlockK);  // (HS, kBlockK) value tile, transposed
    std::vector<float> dk(kBlockK * HS);  // (kBlockK, HS) gradient of the key tile
    std::vector<float> dv(kBlockK * HS);  // (kBlockK, HS) gradient of the value tile
    std::vector<float> dqi(HS);           // (HS) one query row's gradient from one tile
    std::vector<float> D(T);              // (T) D_i = dout_i . out_i
    float p[kBlockK], dp[kBlockK];        // (kBlockK) probabilities and dP of one row

#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t b = 0; b < B; b++) {
      for (int64_t h = 0; h < NH; h++) {
        const float* qbase = qkv + b * T * C3 + h * HS;  // row t at + t * C3
        const float* kbase = qbase + C;
        const float* vbase = qbase + 2 * C;
        const float* dobase = dout + b * T * C + h * HS;  // row t at + t * C
        const float* obase = out + b * T * C + h * HS;
        float* dqbase = dqkv + b * T * C3 + h * HS;  // row t at + t * C3
        float* dkbase = dqbase + C;
        float* dvbase = dqbase + 2 * C;
        const float* L = lse + (b * NH + h) * T;  // (T)

        // dS = P * (dP - D) with D_i = sum_j P_ij dP_ij = dout_i . out_i,
        // which needs no pass over the keys.
        for (int64_t i = 0; i < T; i++) {
          const float* dO = dobase + i * C;
          const float* o = obase + i * C;
          float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
          for (int64_t d = 0; d < HS; d++) acc += dO[d] * o[d];
          D[i] = acc;
          float* dq = dqbase + i * C3;
#pragma omp simd
          for (int64_t d = 0; d < HS; d++) dq[d] = 0.0f;  // written, not accumulated
        }

        for (int64_t j0 = 0; j0 < T; j0 += kBlockK) {
          const int64_t j1 = std::min(T, j0 + kBlockK), nk = j1 - j0;
          load_transposed(kt.data(), kbase, j0, nk, HS, C3);
          load_transposed(vt.data(), vbase, j0, nk, HS, C3);
          std::fill(dk.begin(), dk.end(), 0.0f);
          std::fill(dv.begin(), dv.end(), 0.0f);

          for (int64_t i = j0; i < T; i++) {  // causal: only queries i >= j see key j
            const int64_t nj = std::min(j1, i + 1) - j0;
            const float* q = qbase + i * C3;   // (HS)
            const float* dO = dobase + i * C;  // (HS)
            // Recompute P_ij = exp(s_ij - lse_i) from the saved row log-sum-exp.
            row_times_tile(p, q, kt.data(), nj, HS, scale);
            const float Li = L[i];
#pragma omp simd
            for (int64_t j = 0; j < nj; j++) p[j] = exp_fast(p[j] - Li);
            row_times_tile(dp, dO, vt.data(), nj, HS, 1.0f);
            const float Di = D[i];
#pragma omp simd
            for (int64_t j = 0; j < nj; j++) dp[j] = p[j] * (dp[j] - Di) * scale;  // dS * scale

            std::fill(dqi.begin(), dqi.end(), 0.0f);
            for (int64_t j = 0; j < nj; j++) {
              const float pj = p[j], dsj = dp[j];
              const float* k = kbase + (j0 + j) * C3;  // (HS)
              float* dvj = dv.data() + j * HS;         // (HS)
              float* dkj = dk.data() + j * HS;         // (HS)
#pragma omp simd
              for (int64_t d = 0; d < HS; d++) {
                dvj[d] += pj * dO[d];
                dkj[d] += dsj * q[d];
                dqi[d] += dsj * k[d];
              }
            }
            float* dq = dqbase + i * C3;  // (HS)
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) dq[d] += dqi[d];
          }

          for (int64_t j = 0; j < nk; j++) {
            float* dkr = dkbase + (j0 + j) * C3;  // (HS)
            float* dvr = dvbase + (j0 + j) * C3;  // (HS)
            const float* dkj = dk.data() + j * HS;
            const float* dvj = dv.data() + j * HS;
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) {
              dkr[d] = dkj[d];
              dvr[d] = dvj[d];
            }
          }
        }
      }
    }
  }
}

void attention_decode(float* out, const float* q, const float* k_cache, const float* v_cache,
                      int64_t len, int64_t C, int64_t NH) {
  check_shape(C, NH);
  TESSERA_CHECK(len > 0, "attention_decode: empty KV cache");
  const int64_t HS = C / NH;
  const float scale = 1.0f / std::sqrt(float(HS));

  // One query row per head: a plain (not online) softmax over len scores is
  // cheapest; threads split the heads when there is enough work.
#pragma omp parallel for schedule(static) if (NH * len * HS > (1 << 16))
  for (int64_t h = 0; h < NH; h++) {
    std::vector<float> s(len);     // (len) scores, then probabilities
    const float* qh = q + h * HS;  // (HS)
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < len; t++) {
      const float* k = k_cache + t * C + h * HS;  // (HS)
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
      const float* v = v_cache + t * C + h * HS;  // (HS)
#pragma omp simd
      for (int64_t d = 0; d < HS; d++) o[d] += pt * v[d];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t d = 0; d < HS; d++) o[d] *= inv;
  }
}

}  // namespace tessera::cpu
