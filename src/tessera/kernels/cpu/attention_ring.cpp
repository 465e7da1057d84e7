// Ring attention's block kernels (attention_ring.h): one query row at a
// time against a block's keys, in fp32, with the causal mask, RoPE and the
// probability dropout all taken at global positions.
#include "tessera/kernels/cpu/attention_ring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cast.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/dropout.h"
#include "tessera/kernels/cpu/rope.h"

namespace tessera::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void check_heads(const AttentionHeads& hd) {
  TESSERA_CHECK(hd.q_heads > 0 && hd.kv_heads > 0 && hd.head_size > 0 &&
                    hd.q_heads % hd.kv_heads == 0 && (!hd.rope() || hd.head_size % 2 == 0),
                "ring attention: {} query heads, {} key/value heads of size {}", hd.q_heads,
                hd.kv_heads, hd.head_size);
}

// What a block call (forward or backward) derives once from its heads, the
// sequence length and the dropout site: the head counts and widths, the
// softmax scale, the RoPE table over the whole sequence (null: no
// rotation) and the dropout stream.
struct RingCall {
  int64_t NH, KVH, HS, G;  // query heads, key/value heads, head size, queries per kv head
  int64_t W, C, KW;        // widths of a qkv row, an output row, a [k | v] block row
  float scale;             // 1 / sqrt(HS)
  std::shared_ptr<const RopeTable> rope;
  bool dropout;
  DropoutStream st;

  RingCall(const AttentionHeads& hd, int64_t T, const DropoutSite* drop)
      : NH((check_heads(hd), hd.q_heads)),  // checked before the table is built
        KVH(hd.kv_heads),
        HS(hd.head_size),
        G(hd.group()),
        W(hd.qkv_width()),
        C(hd.q_width()),
        KW(2 * hd.kv_width()),
        scale(1.0f / std::sqrt(float(hd.head_size))),
        rope(hd.rope() ? rope_table(T, hd.head_size, hd.rope_base) : nullptr),
        dropout(drop != nullptr && drop->active()),
        st(dropout ? *drop : DropoutSite{}) {}
};

// The block's keys and values of kv head g of sequence b, k rotated to
// their positions: krot, v (Tk, HS).
void load_block(std::vector<float>& krot, std::vector<float>& v, const float* kv,
                const int64_t* k_pos, int64_t Tk, int64_t b, int64_t g, const AttentionHeads& hd,
                const RopeTable* rope) {
  const int64_t HS = hd.head_size, KW = 2 * hd.kv_width();
  krot.resize(Tk * HS);
  v.resize(Tk * HS);
  for (int64_t j = 0; j < Tk; j++) {
    const float* row = kv + (b * Tk + j) * KW;  // (2 KVH HS)
    std::copy_n(row + g * HS, HS, &krot[j * HS]);
    std::copy_n(row + hd.kv_width() + g * HS, HS, &v[j * HS]);
    if (rope) rope_rotate(&krot[j * HS], rope->cos_row(k_pos[j]), rope->sin_row(k_pos[j]), rope->half);
  }
}

// The dropout factors of one query row against the block's keys: z (Tk) =
// keep_scale or 0, drawn for elements (head hg, query qp, key k_pos[j]) of
// the whole (T, T) matrix. The block's keys come in runs of consecutive
// positions (a chunk each), so bits are drawn a run at a time.
void dropout_row(float* z, const DropoutStream& st, const DropoutSite& site, int64_t sample,
                 int64_t hg, int64_t qp, const int64_t* k_pos, int64_t Tk, int64_t T,
                 std::vector<uint32_t>& bits) {
  bits.resize(Tk);
  const float keep = site.keep_scale();
  for (int64_t j0 = 0; j0 < Tk;) {
    int64_t j1 = j0 + 1;
    while (j1 < Tk && k_pos[j1] == k_pos[j1 - 1] + 1) j1++;
    dropout_bits(st, sample, attention_prob_element(hg, qp, k_pos[j0], T), j1 - j0, bits.data());
    for (int64_t j = j0; j < j1; j++) z[j] = bits[j - j0] >= st.threshold ? keep : 0.0f;
    j0 = j1;
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

}  // namespace

void ring_kv_pack(float* kv, const float* qkv, int64_t B, int64_t T, const AttentionHeads& hd) {
  const int64_t W = hd.qkv_width(), KW = 2 * hd.kv_width();
  for (int64_t r = 0; r < B * T; r++) std::copy_n(qkv + r * W + hd.q_width(), KW, kv + r * KW);
}

void ring_attention_forward_init(float* out, float* lse, int64_t B, int64_t Tq,
                                 const AttentionHeads& hd) {
  std::fill_n(out, B * Tq * hd.q_width(), 0.0f);
  std::fill_n(lse, B * hd.q_heads * Tq, kNegInf);
}

void ring_attention_forward_block(float* out, float* lse, const float* qkv, const int64_t* q_pos,
                                  int64_t Tq, const float* kv, const int64_t* k_pos, int64_t Tk,
                                  int64_t B, int64_t T, const AttentionHeads& hd,
                                  const DropoutSite* drop) {
  const RingCall rc(hd, T, drop);
  const int64_t NH = rc.NH, KVH = rc.KVH, HS = rc.HS, G = rc.G, W = rc.W, C = rc.C;
  const float scale = rc.scale;
  const RopeTable* rope = rc.rope.get();
  const bool dropout = rc.dropout;
  const DropoutStream& st = rc.st;

#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; b++)
    for (int64_t g = 0; g < KVH; g++) {
      std::vector<float> krot, v, q(HS), s(Tk), z(Tk, 1.0f), acc(HS);  // (Tk, HS) x2, (HS), (Tk) x2, (HS)
      std::vector<uint32_t> bits;
      load_block(krot, v, kv, k_pos, Tk, b, g, hd, rope);
      for (int64_t h = g * G; h < (g + 1) * G; h++)
        for (int64_t i = 0; i < Tq; i++) {
          const int64_t qp = q_pos[i];
          std::copy_n(qkv + (b * Tq + i) * W + h * HS, HS, q.data());
          if (rope) rope_rotate(q.data(), rope->cos_row(qp), rope->sin_row(qp), rope->half);
          float m = kNegInf;
          for (int64_t j = 0; j < Tk; j++) {
            s[j] = k_pos[j] <= qp ? dot(q.data(), &krot[j * HS], HS) * scale : kNegInf;
            m = std::max(m, s[j]);
          }
          if (m == kNegInf) continue;  // no key of this block is visible
          if (dropout)
            dropout_row(z.data(), st, *drop, drop->first_sample + b, drop->head0 + h, qp, k_pos,
                        Tk, T, bits);
          // The normaliser sums the probabilities before dropout (as the
          // flash kernel's); the values are summed after it.
          float l = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int64_t j = 0; j < Tk; j++) {
            if (s[j] == kNegInf) continue;
            const float p = std::exp(s[j] - m);
            l += p;
            const float pz = p * z[j];
            if (pz == 0.0f) continue;
            const float* vj = &v[j * HS];
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) acc[d] += pz * vj[d];
          }
          float* lr = lse + (b * NH + h) * Tq + i;
          float* o = out + (b * Tq + i) * C + h * HS;  // (HS)
          const float blk = m + std::log(l);
          const float hi = std::max(*lr, blk);
          const float merged = hi + std::log(std::exp(*lr - hi) + std::exp(blk - hi));
          const float keep_old = std::exp(*lr - merged), take_new = std::exp(blk - merged) / l;
          for (int64_t d = 0; d < HS; d++) o[d] = o[d] * keep_old + acc[d] * take_new;
          *lr = merged;
        }
    }
}

void ring_attention_backward_init(float* D, const float* dout, const float* out, int64_t B,
                                  int64_t Tq, const AttentionHeads& hd) {
  const int64_t NH = hd.q_heads, HS = hd.head_size, C = hd.q_width();
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < Tq; i++) {
        const int64_t r = (b * Tq + i) * C + h * HS;
        D[(b * NH + h) * Tq + i] = dot(dout + r, out + r, HS);
      }
}

void ring_attention_backward_block(float* dq, float* dkv, const float* dout, const float* qkv,
                                   const float* lse, const float* D, const int64_t* q_pos,
                                   int64_t Tq, const float* kv, const int64_t* k_pos, int64_t Tk,
                                   int64_t B, int64_t T, const AttentionHeads& hd,
                                   const DropoutSite* drop) {
  const RingCall rc(hd, T, drop);
  const int64_t NH = rc.NH, KVH = rc.KVH, HS = rc.HS, G = rc.G, W = rc.W, C = rc.C;
  const int64_t KW = rc.KW;
  const float scale = rc.scale;
  const RopeTable* rope = rc.rope.get();
  const bool dropout = rc.dropout;
  const DropoutStream& st = rc.st;

  // One task per (sequence, kv head): its query heads' dq rows and its
  // block's dk, dv rows belong to it alone.
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; b++)
    for (int64_t g = 0; g < KVH; g++) {
      std::vector<float> krot, v, q(HS), dqr(HS), z(Tk, 1.0f);  // (Tk, HS) x2, (HS) x2, (Tk)
      std::vector<float> dk(Tk * HS, 0.0f), dv(Tk * HS, 0.0f);  // (Tk, HS): rotated dk, dv
      std::vector<uint32_t> bits;
      load_block(krot, v, kv, k_pos, Tk, b, g, hd, rope);
      for (int64_t h = g * G; h < (g + 1) * G; h++)
        for (int64_t i = 0; i < Tq; i++) {
          const int64_t qp = q_pos[i];
          if (std::none_of(k_pos, k_pos + Tk, [&](int64_t p) { return p <= qp; }))
            continue;  // no key of this block is visible
          std::copy_n(qkv + (b * Tq + i) * W + h * HS, HS, q.data());
          if (rope) rope_rotate(q.data(), rope->cos_row(qp), rope->sin_row(qp), rope->half);
          if (dropout)
            dropout_row(z.data(), st, *drop, drop->first_sample + b, drop->head0 + h, qp, k_pos,
                        Tk, T, bits);
          const float L = lse[(b * NH + h) * Tq + i], Di = D[(b * NH + h) * Tq + i];
          const float* go = dout + (b * Tq + i) * C + h * HS;  // (HS)
          std::fill(dqr.begin(), dqr.end(), 0.0f);
          for (int64_t j = 0; j < Tk; j++) {
            if (k_pos[j] > qp) continue;
            const float* kj = &krot[j * HS];
            const float p = std::exp(dot(q.data(), kj, HS) * scale - L);
            // dV = (P Z)^T dO; dS = P (Z dO.v - D): out_i = sum_j P_ij Z_ij v_j.
            const float pz = p * z[j];
            const float ds = p * (z[j] * dot(go, &v[j * HS], HS) - Di) * scale;
            float* dkj = &dk[j * HS];
            float* dvj = &dv[j * HS];
#pragma omp simd
            for (int64_t d = 0; d < HS; d++) {
              dqr[d] += ds * kj[d];
              dkj[d] += ds * q[d];
              dvj[d] += pz * go[d];
            }
          }
          // Back from the rotated q to the stored one.
          if (rope) rope_unrotate(dqr.data(), rope->cos_row(qp), rope->sin_row(qp), rope->half);
          float* dqi = dq + (b * Tq + i) * C + h * HS;
          for (int64_t d = 0; d < HS; d++) dqi[d] += dqr[d];
        }
      for (int64_t j = 0; j < Tk; j++) {
        float* dkj = &dk[j * HS];
        if (rope) rope_unrotate(dkj, rope->cos_row(k_pos[j]), rope->sin_row(k_pos[j]), rope->half);
        float* row = dkv + (b * Tk + j) * KW;  // (2 KVH HS)
        for (int64_t d = 0; d < HS; d++) {
          row[g * HS + d] += dkj[d];
          row[hd.kv_width() + g * HS + d] += dv[j * HS + d];
        }
      }
    }
}

}  // namespace tessera::cpu

namespace tessera::kernels {

// The backend's entries (backend_methods.inc): the fp32 kernels above.
void CpuBackend::ring_kv_pack(float* kv, const float* qkv, int64_t B, int64_t T,
                              const AttentionHeads& heads) const {
  cpu::ring_kv_pack(kv, qkv, B, T, heads);
}

void CpuBackend::ring_attention_forward_block(float* out, float* lse, const float* qkv,
                                              const int64_t* q_pos, int64_t Tq, const float* kv,
                                              const int64_t* k_pos, int64_t Tk, int64_t B,
                                              int64_t T, const AttentionHeads& heads,
                                              const DropoutSite* drop) const {
  cpu::ring_attention_forward_block(out, lse, qkv, q_pos, Tq, kv, k_pos, Tk, B, T, heads, drop);
}

void CpuBackend::ring_attention_backward_init(float* D, const float* dout, const float* out,
                                              int64_t B, int64_t Tq,
                                              const AttentionHeads& heads) const {
  cpu::ring_attention_backward_init(D, dout, out, B, Tq, heads);
}

void CpuBackend::ring_attention_backward_block(float* dq, float* dkv, const float* dout,
                                               const float* qkv, const float* lse,
                                               const float* D, const int64_t* q_pos, int64_t Tq,
                                               const float* kv, const int64_t* k_pos, int64_t Tk,
                                               int64_t B, int64_t T, const AttentionHeads& heads,
                                               const DropoutSite* drop) const {
  cpu::ring_attention_backward_block(dq, dkv, dout, qkv, lse, D, q_pos, Tq, kv, k_pos, Tk, B, T,
                                     heads, drop);
}

void CpuBackend::ring_qkv_grad(Act dqkv, const float* dq, const float* dkv, int64_t B,
                               int64_t T, const AttentionHeads& heads) const {
  const int64_t W = heads.qkv_width(), C = heads.q_width(), KW = 2 * heads.kv_width();
  // Row by row: dq's C columns, then dkv's KW, in dqkv's type.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < B * T; r++)
    switch (dqkv.dtype) {
      case Precision::Fp32:
        std::copy_n(dq + r * C, C, dqkv.f32() + r * W);
        std::copy_n(dkv + r * KW, KW, dqkv.f32() + r * W + C);
        break;
      case Precision::Bf16:
        cpu::cast_fp32_to_bf16(dqkv.u16() + r * W, dq + r * C, C);
        cpu::cast_fp32_to_bf16(dqkv.u16() + r * W + C, dkv + r * KW, KW);
        break;
      case Precision::Fp16:
        cpu::cast_fp32_to_fp16(dqkv.u16() + r * W, dq + r * C, C);
        cpu::cast_fp32_to_fp16(dqkv.u16() + r * W + C, dkv + r * KW, KW);
        break;
      default: break;  // no other activation types
    }
}

}  // namespace tessera::kernels
