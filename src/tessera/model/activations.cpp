#include "tessera/model/activations.h"

namespace tessera {

namespace {

// Two cursors: views saved from forward to backward, and scratch needed only
// while one forward or backward call runs. With null bases they only count.
struct Carver {
  float* saved_base;
  float* scratch_base;
  int64_t saved = 0, scratch = 0;  // floats, each view rounded to 64 bytes
  static int64_t round(int64_t n) { return (n + 15) / 16 * 16; }
  float* take(int64_t& off, float* base, int64_t n) {
    float* p = base ? base + off : nullptr;
    off += round(n);
    return p;
  }
  float* keep(int64_t n) { return take(saved, saved_base, n); }
  float* temp(int64_t n) { return take(scratch, scratch_base, n); }
};

// Walks the views in a fixed order, pointing a's views into c's bases (null
// pointers when c only counts).
void carve(Activations& a, const ActShape& s, Carver& c) {
  const int64_t BT = s.N(), Ns = s.Ns();
  const Recompute rc = s.recompute;
  std::vector<LayerActs>& layers = a.layers;
  layers.assign(size_t(s.L), LayerActs{});
  a.encoded = c.keep(Ns * s.C);
  // The recomputed layer: one set of the dropped views, shared by every layer.
  LayerActs shared;
  if (rc == Recompute::Full) {
    shared.ln1 = c.temp(Ns * s.C);
    shared.ln1_mean = c.temp(Ns);
    shared.ln1_rstd = c.temp(Ns);
    shared.qkv = c.temp(BT * 3 * s.Cl);
    shared.res_mid = c.temp(Ns * s.C);
    shared.ln2 = c.temp(Ns * s.C);
    shared.ln2_mean = c.temp(Ns);
    shared.ln2_rstd = c.temp(Ns);
    shared.fch = c.temp(BT * s.F);
  }
  if (rc != Recompute::None) {
    shared.atty = c.temp(BT * s.Cl);
    shared.lse = c.temp(s.B * s.NH * s.T);
    shared.fch_gelu = c.temp(BT * s.F);
  }
  for (auto& l : layers) {
    l = shared;
    if (rc != Recompute::Full) {
      l.ln1 = c.keep(Ns * s.C);
      l.ln1_mean = c.keep(Ns);
      l.ln1_rstd = c.keep(Ns);
      l.qkv = c.keep(BT * 3 * s.Cl);
    }
    if (rc == Recompute::None) {
      l.atty = c.keep(BT * s.Cl);
      l.lse = c.keep(s.B * s.NH * s.T);
    }
    if (rc != Recompute::Full) {
      l.res_mid = c.keep(Ns * s.C);
      l.ln2 = c.keep(Ns * s.C);
      l.ln2_mean = c.keep(Ns);
      l.ln2_rstd = c.keep(Ns);
      l.fch = c.keep(BT * s.F);
    }
    if (rc == Recompute::None) l.fch_gelu = c.keep(BT * s.F);
    // Always kept: the next layer's input (or the stage's output).
    l.res_out = c.keep(Ns * s.C);
  }
  if (s.has_head) {
    a.lnf = c.keep(Ns * s.C);
    a.lnf_mean = c.keep(Ns);
    a.lnf_rstd = c.keep(Ns);
    a.logits = c.keep(BT * s.V);
    a.ce_lse = c.keep(BT);
    a.losses = c.keep(BT);
    a.ce_sums = c.keep(2 * BT);
  } else {  // a stage without the head: no head views (a may be re-carved)
    a.lnf = a.lnf_mean = a.lnf_rstd = a.logits = a.ce_lse = a.losses = a.ce_sums = nullptr;
  }
  a.dresid = c.temp(Ns * s.C);
  a.dln = c.temp(BT * s.C);
  a.dqkv = c.temp(BT * 3 * s.Cl);
  a.datty = c.temp(BT * s.Cl);
  a.dfch = c.temp(BT * s.F);
  a.tp_full = s.sp() ? c.temp(BT * s.C) : nullptr;
}

Carver count(const ActShape& s) {
  Carver c{nullptr, nullptr};
  Activations unused;
  carve(unused, s, c);
  return c;
}

}  // namespace

int64_t activations_saved_bytes(const ActShape& s) { return count(s).saved * 4; }
int64_t activations_scratch_bytes(const ActShape& s) { return count(s).scratch * 4; }
int64_t activations_bytes(const ActShape& s) {
  const Carver c = count(s);
  return (c.saved + c.scratch) * 4;
}

void activations_init(Activations& a, const ActShape& s) {
  const Carver n = count(s);
  a.s = s;
  a.arena.allocate(n.saved + n.scratch);
  Carver c{a.arena.f32(), a.arena.f32() + n.saved};
  carve(a, s, c);
}

void activations_init(Activations& a, const ActShape& s, float* scratch) {
  a.s = s;
  a.arena.allocate(count(s).saved);
  Carver c{a.arena.f32(), scratch};
  carve(a, s, c);
}

}  // namespace tessera
