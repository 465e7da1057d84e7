// The MoE layer's routing kernels (backend_methods.inc: moe_route_*,
// moe_permute_*, moe_combine_*), defined on CpuBackend. Every loop runs in
// a fixed order, so the choices, drops and sums are the same bits on any
// thread count and any layout that routes the same micro-batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/kernels/cpu/storage.h"
#include "tessera/kernels/moe_stats.h"

namespace tessera::kernels {

namespace {

// Row n's softmax statistics over E logits: max and sum of exp(l - max).
struct RowSoftmax {
  float max = 0;
  double sum = 0;
  float prob(float l) const { return float(std::exp(double(l - max)) / sum); }
  double lse() const { return double(max) + std::log(sum); }
};

RowSoftmax row_softmax(const float* l, int64_t E) {
  RowSoftmax r;
  r.max = *std::max_element(l, l + E);
  for (int64_t e = 0; e < E; ++e) r.sum += std::exp(double(l[e] - r.max));
  return r;
}

// dst row (C elements) of a view's type = src row, a copy of its bytes.
void copy_row(Act dst, int64_t to, ConstAct src, int64_t from, int64_t C) {
  const size_t w = dtype_size(src.dtype);
  std::memcpy(static_cast<char*>(dst.p) + size_t(to * C) * w,
              static_cast<const char*>(src.p) + size_t(from * C) * w, size_t(C) * w);
}

template <class S>
void scaled_row(typename S::T* dst, const float* src, float g, int64_t C) {
  for (int64_t c = 0; c < C; ++c) dst[c] = S::store(g * src[c]);
}

// The aux loss's constant per group of G tokens and expert: E / (G^2 K)
// times the expert's choices in the group, over the groups' count (the
// loss is their mean). coef (N / G, E).
std::vector<double> aux_coefficients(const int32_t* idx, int64_t N, int64_t E, int64_t K,
                                     int64_t G) {
  TESSERA_CHECK(G >= 1 && N % G == 0, "moe_route: {} tokens in groups of {}", N, G);
  const int64_t groups = N / G;
  std::vector<double> coef(size_t(groups * E), 0.0);
  for (int64_t i = 0; i < N * K; ++i) coef[size_t((i / K) / G * E + idx[i])] += 1.0;
  const double scale = double(E) / (double(G) * double(G) * double(K) * double(groups));
  for (double& c : coef) c *= scale;
  return coef;
}

}  // namespace

void CpuBackend::moe_route_forward(int32_t* idx, float* gates, int32_t* slot, int32_t* counts,
                                   float* stats, const float* logits, int64_t N, int64_t E,
                                   int64_t K, int64_t capacity, int64_t aux_group,
                                   bool pre_softmax) const {
  TESSERA_CHECK(K >= 1 && K <= E, "moe_route_forward: top-{} of {} experts", K, E);
  // Top-k by repeated selection: the largest logit not yet taken, the
  // lowest expert index on a tie (strict >), so every layout picks the same.
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * E;  // (E)
    int32_t* ix = idx + n * K;        // (K)
    for (int64_t k = 0; k < K; ++k) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        bool taken = false;
        for (int64_t j = 0; j < k; ++j) taken = taken || ix[j] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
      }
      ix[k] = int32_t(best);
    }
    if (pre_softmax) {
      // The full softmax's probabilities of the chosen experts, as they are
      // (the softmax is monotone, so its top-k are the logits' top-k).
      const RowSoftmax r = row_softmax(l, E);
      for (int64_t k = 0; k < K; ++k) gates[n * K + k] = r.prob(l[ix[k]]);
      continue;
    }
    // The softmax of the chosen logits (ix[0] holds the largest).
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += std::exp(double(l[ix[k]] - l[ix[0]]));
    for (int64_t k = 0; k < K; ++k)
      gates[n * K + k] = float(std::exp(double(l[ix[k]] - l[ix[0]])) / sum);
  }
  // Capacity in token order: serial, the (b, t) order of the micro-batch.
  const std::vector<double> coef = aux_coefficients(idx, N, E, K, aux_group);  // (N / G, E)
  std::vector<int64_t> chosen(size_t(E), 0);  // (E) choices before drops
  std::fill(counts, counts + E, 0);
  double aux = 0, z = 0;
  int64_t dropped = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * E;
    const RowSoftmax r = row_softmax(l, E);
    const double* c = coef.data() + (n / aux_group) * E;  // (E) this token's group
    for (int64_t e = 0; e < E; ++e) aux += c[e] * double(r.prob(l[e]));
    z += r.lse() * r.lse();
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = idx[n * K + k];
      ++chosen[size_t(e)];
      if (counts[e] < capacity) {
        slot[n * K + k] = counts[e]++;  // its place within the expert, offset below
      } else {
        slot[n * K + k] = -1;
        ++dropped;
      }
    }
  }
  std::vector<int32_t> offset(size_t(E), 0);  // (E) first row of each expert
  for (int64_t e = 1; e < E; ++e) offset[size_t(e)] = offset[size_t(e - 1)] + counts[e - 1];
  for (int64_t i = 0; i < N * K; ++i)
    if (slot[i] >= 0) slot[i] += offset[size_t(idx[i])];
  stats[kMoeAuxLoss] = float(aux);
  stats[kMoeZLoss] = float(z / double(N));
  stats[kMoeDropped] = float(dropped);
  stats[kMoeTokens] = float(N);
  for (int64_t e = 0; e < E; ++e) stats[kMoeStats + e] = float(chosen[size_t(e)]);
}

void CpuBackend::moe_route_backward(float* dlogits, const float* dgates, const float* logits,
                                    const int32_t* idx, const float* gates, int64_t N, int64_t E,
                                    int64_t K, int64_t aux_group, float aux_scale,
                                    float z_scale, bool pre_softmax) const {
  // d aux / d p[n, e]: the coefficient of n's group (the choices held constant).
  const std::vector<double> coef = aux_coefficients(idx, N, E, K, aux_group);  // (N / G, E)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * E;  // (E)
    float* dl = dlogits + n * E;      // (E)
    const RowSoftmax r = row_softmax(l, E);
    const double* c = coef.data() + (n / aux_group) * E;  // (E)
    const float* g = gates + n * K;    // (K)
    const float* dg = dgates + n * K;  // (K)
    // Through the full softmax p: dL/dp_e = aux_scale c_e (the aux loss)
    // plus, under pre_softmax, dg_k where e = idx_k (the gates are p there);
    // dl_e = p_e (dL/dp_e - sum_j p_j dL/dp_j), plus z's 2 lse / N * p_e.
    double dot = 0;
    for (int64_t e = 0; e < E; ++e) dot += double(r.prob(l[e])) * double(aux_scale) * c[e];
    if (pre_softmax)
      for (int64_t k = 0; k < K; ++k) dot += double(g[k]) * double(dg[k]);
    const double dz = double(z_scale) * 2.0 * r.lse() / double(N);
    for (int64_t e = 0; e < E; ++e) {
      const double p = r.prob(l[e]);
      dl[e] = float(p * (double(aux_scale) * c[e] - dot) + dz * p);
    }
    if (pre_softmax) {  // the gates' own term, p_e dg_k at the chosen
      for (int64_t k = 0; k < K; ++k) dl[idx[n * K + k]] += float(double(g[k]) * double(dg[k]));
      continue;
    }
    // Default: the gates are the softmax over the K chosen logits.
    double gdot = 0;
    for (int64_t k = 0; k < K; ++k) gdot += double(g[k]) * double(dg[k]);
    for (int64_t k = 0; k < K; ++k)
      dl[idx[n * K + k]] += float(double(g[k]) * (double(dg[k]) - gdot));
  }
}

void CpuBackend::moe_permute_forward(Act xs, ConstAct x, const int32_t* slot, int64_t N,
                                     int64_t K, int64_t C) const {
  TESSERA_CHECK(xs.dtype == x.dtype, "moe_permute_forward: {} rows into a {} buffer",
                precision_name(x.dtype), precision_name(xs.dtype));
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k)
      if (slot[n * K + k] >= 0) copy_row(xs, slot[n * K + k], x, n, C);
}

void CpuBackend::moe_permute_backward(float* dx, const float* dxs, const int32_t* slot, int64_t N,
                                      int64_t K, int64_t C) const {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* d = dx + n * C;  // (C)
    std::fill(d, d + C, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      if (slot[n * K + k] < 0) continue;
      const float* s = dxs + int64_t(slot[n * K + k]) * C;  // (C)
      for (int64_t c = 0; c < C; ++c) d[c] += s[c];
    }
  }
}

void CpuBackend::moe_combine_forward(float* out, const float* ys, const float* gates,
                                     const int32_t* slot, int64_t N, int64_t K, int64_t C) const {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * C;  // (C)
    std::fill(o, o + C, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      if (slot[n * K + k] < 0) continue;
      const float g = gates[n * K + k];
      const float* y = ys + int64_t(slot[n * K + k]) * C;  // (C)
      for (int64_t c = 0; c < C; ++c) o[c] += g * y[c];
    }
  }
}

void CpuBackend::moe_combine_backward(Act dys, float* dgates, const float* dout, const float* ys,
                                      const float* gates, const int32_t* slot, int64_t N,
                                      int64_t K, int64_t C) const {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* d = dout + n * C;  // (C)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = slot[n * K + k];
      if (s < 0) {
        dgates[n * K + k] = 0.0f;  // a dropped choice added nothing
        continue;
      }
      const float* y = ys + s * C;  // (C)
      double dot = 0;
      for (int64_t c = 0; c < C; ++c) dot += double(d[c]) * double(y[c]);
      dgates[n * K + k] = float(dot);
      const float g = gates[n * K + k];
      switch (dys.dtype) {
        case Precision::Fp32: scaled_row<cpu::StoreF32>(dys.f32() + s * C, d, g, C); break;
        case Precision::Bf16:
          scaled_row<cpu::StoreBf16>(dys.u16() + s * C, d, g, C);
          break;
        case Precision::Fp16:
          scaled_row<cpu::StoreFp16>(dys.u16() + s * C, d, g, C);
          break;
        case Precision::Fp64: fail("moe_combine_backward: no fp64 kernel");
      }
    }
  }
}

void CpuBackend::moe_shared_gate_forward(float* out, float* gate, const float* glogit,
                                         const float* y, int64_t N, int64_t C) const {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float g = float(1.0 / (1.0 + std::exp(-double(glogit[n]))));
    gate[n] = g;
    float* o = out + n * C;         // (C)
    const float* yr = y + n * C;    // (C)
    for (int64_t c = 0; c < C; ++c) o[c] += g * yr[c];
  }
}

void CpuBackend::moe_shared_gate_backward(Act dy, float* dglogit, const float* dout,
                                          const float* y, const float* gate, int64_t N,
                                          int64_t C) const {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* d = dout + n * C;  // (C)
    const float* yr = y + n * C;    // (C)
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) dot += double(d[c]) * double(yr[c]);
    const float g = gate[n];
    dglogit[n] = float(double(g) * (1.0 - double(g)) * dot);
    switch (dy.dtype) {
      case Precision::Fp32: scaled_row<cpu::StoreF32>(dy.f32() + n * C, d, g, C); break;
      case Precision::Bf16: scaled_row<cpu::StoreBf16>(dy.u16() + n * C, d, g, C); break;
      case Precision::Fp16: scaled_row<cpu::StoreFp16>(dy.u16() + n * C, d, g, C); break;
      case Precision::Fp64: fail("moe_shared_gate_backward: no fp64 kernel");
    }
  }
}

}  // namespace tessera::kernels
