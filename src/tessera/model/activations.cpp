#include "tessera/model/activations.h"

namespace tessera {

// Walks the views in a fixed order; with base == nullptr it only counts.
static int64_t carve(Activations* a, const ActShape& s, float* base) {
  int64_t off = 0;
  auto take = [&](int64_t n) {
    float* p = base ? base + off : nullptr;
    off += (n + 15) / 16 * 16;  // keep every view 64-byte aligned
    return p;
  };
  const int64_t BT = s.N(), Ns = s.Ns();
  std::vector<LayerActs> layers(size_t(s.L));
  float* encoded = take(Ns * s.C);
  for (auto& l : layers) {
    l.ln1 = take(Ns * s.C);
    l.ln1_mean = take(Ns);
    l.ln1_rstd = take(Ns);
    l.qkv = take(BT * 3 * s.Cl);
    l.atty = take(BT * s.Cl);
    l.lse = take(s.B * s.NH * s.T);
    l.res_mid = take(Ns * s.C);
    l.ln2 = take(Ns * s.C);
    l.ln2_mean = take(Ns);
    l.ln2_rstd = take(Ns);
    l.fch = take(BT * s.F);
    l.fch_gelu = take(BT * s.F);
    l.res_out = take(Ns * s.C);
  }
  Activations tmp;
  if (s.has_head) {
    tmp.lnf = take(Ns * s.C);
    tmp.lnf_mean = take(Ns);
    tmp.lnf_rstd = take(Ns);
    tmp.logits = take(BT * s.V);
    tmp.ce_lse = take(BT);
    tmp.losses = take(BT);
    tmp.ce_sums = take(2 * BT);
  }
  tmp.dresid = take(Ns * s.C);
  tmp.dln = take(BT * s.C);
  tmp.dqkv = take(BT * 3 * s.Cl);
  tmp.datty = take(BT * s.Cl);
  tmp.dfch = take(BT * s.F);
  if (s.sp()) tmp.tp_full = take(BT * s.C);
  if (a) {
    a->encoded = encoded;
    a->layers = std::move(layers);
    a->lnf = tmp.lnf;
    a->lnf_mean = tmp.lnf_mean;
    a->lnf_rstd = tmp.lnf_rstd;
    a->logits = tmp.logits;
    a->ce_lse = tmp.ce_lse;
    a->losses = tmp.losses;
    a->ce_sums = tmp.ce_sums;
    a->dresid = tmp.dresid;
    a->dln = tmp.dln;
    a->dqkv = tmp.dqkv;
    a->datty = tmp.datty;
    a->dfch = tmp.dfch;
    a->tp_full = tmp.tp_full;
  }
  return off;
}

int64_t activations_bytes(const ActShape& s) { return carve(nullptr, s, nullptr) * 4; }

void activations_init(Activations& a, const ActShape& s) {
  a.s = s;
  a.arena.allocate(carve(nullptr, s, nullptr));
  carve(&a, s, a.arena.f32());
}

}  // namespace tessera
