#include "tessera/model/activations.h"

#include "tessera/core/error.h"
#include "tessera/kernels/moe_stats.h"

namespace tessera {

namespace {

// Two cursors: views saved from forward to backward, and scratch needed only
// while one forward or backward call runs. With null bases they only count.
// fp32 views take 4 bytes an element; the kernels::Act views 2 when the
// shape is 16-bit (precision bf16 or fp16, the views' tag). Every view
// starts on a 64-byte boundary.
struct Carver {
  char* saved_base;
  char* scratch_base;
  Precision precision = Precision::Fp32;
  int64_t saved = 0, scratch = 0;  // bytes, each view rounded to 64
  static int64_t round(int64_t bytes) { return (bytes + 63) / 64 * 64; }
  void* take(int64_t& off, char* base, int64_t bytes) {
    void* p = base ? base + off : nullptr;
    off += round(bytes);
    return p;
  }
  float* keep(int64_t n) { return static_cast<float*>(take(saved, saved_base, 4 * n)); }
  float* temp(int64_t n) { return static_cast<float*>(take(scratch, scratch_base, 4 * n)); }
  kernels::Act act(int64_t& off, char* base, int64_t n) {
    if (precision == Precision::Fp32) return static_cast<float*>(take(off, base, 4 * n));
    return kernels::Act(static_cast<uint16_t*>(take(off, base, 2 * n)), precision);
  }
  kernels::Act keep_act(int64_t n) { return act(saved, saved_base, n); }
  kernels::Act temp_act(int64_t n) { return act(scratch, scratch_base, n); }
};

// An MoE layer's kept views (int32 views take 4 bytes an element too).
void carve_moe(MoeActs& m, const ActShape& s, Carver& c) {
  const int64_t N = s.N(), R = s.R();
  auto ints = [&](int64_t n) { return reinterpret_cast<int32_t*>(c.keep(n)); };
  m.logits = c.keep(N * s.E);
  m.idx = ints(N * s.K);
  m.gates = c.keep(N * s.K);
  m.slot = ints(N * s.K);
  m.counts = ints(s.E);
  m.stats = c.keep(kernels::kMoeStats + s.E);
  m.xs = c.keep_act(R * s.C);
  m.h = c.keep_act(R * s.Ff());
  m.act = c.keep_act(R * s.F);
  m.ys = c.keep(R * s.C);
  if (s.S > 0) {  // the shared expert: every token's row
    m.sh_h = c.keep_act(N * s.Sf());
    m.sh_act = c.keep_act(N * s.S);
    // Its output is read again in backward only by the gate's gradient.
    m.sh_y = s.shared_gate ? c.keep(N * s.C) : nullptr;  // else the scratch moe_sh_y
    m.sh_gate = s.shared_gate ? c.keep(N) : nullptr;
  }
}

// Its expert side under expert parallelism: ep x R rows, the worst case.
void carve_ep_moe(EpMoeActs& x, const ActShape& s, Carver& c) {
  const int64_t Rx = s.ep * s.R();
  x.all_counts = c.keep(s.ep * s.E);
  x.xe = c.keep(Rx * s.C);
  x.h = c.keep(Rx * s.Ff());
  x.act = c.keep(Rx * s.F);
}

// Walks the views in a fixed order, pointing a's views into c's bases (null
// pointers when c only counts).
void carve(Activations& a, const ActShape& s, Carver& c) {
  const int64_t BT = s.N(), Ns = s.Ns();
  const int64_t Cqkv = s.Cqkv(), Ff = s.Ff();
  const Recompute rc = s.recompute;
  // Which MLP views each layer carves: GPTConfig::moe_layer (ActShape::moe_layer).
  const bool dense_mlp = s.any_mlp_kind(ActShape::kDenseMlp);
  const bool moe = s.any_mlp_kind(ActShape::kMoeMlp);
  // RMSNorm keeps no mean.
  auto mean_temp = [&] { return s.rmsnorm ? nullptr : c.temp(Ns); };
  auto mean_keep = [&] { return s.rmsnorm ? nullptr : c.keep(Ns); };
  std::vector<LayerActs>& layers = a.layers;
  layers.assign(size_t(s.L), LayerActs{});
  a.encoded = c.keep(Ns * s.C);
  // The recomputed layer: one set of the dropped views, shared by every layer.
  LayerActs shared;
  if (rc == Recompute::Full) {
    shared.ln1 = c.temp_act(Ns * s.C);
    shared.ln1_mean = mean_temp();
    shared.ln1_rstd = c.temp(Ns);
    shared.qkv = c.temp_act(BT * Cqkv);
    shared.res_mid = c.temp(Ns * s.C);
    shared.ln2 = c.temp_act(Ns * s.C);
    shared.ln2_mean = mean_temp();
    shared.ln2_rstd = c.temp(Ns);
    if (dense_mlp) shared.fch = c.temp_act(BT * Ff);
  }
  if (rc != Recompute::None) {
    shared.atty = c.temp_act(BT * s.Cl);
    shared.lse = c.temp(s.B * s.NH * s.T);
    if (dense_mlp) shared.fch_gelu = c.temp_act(BT * s.F);
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerActs& l = layers[i];
    const uint8_t kind = s.mlp_kind(int64_t(i));
    const bool moe_here = kind & ActShape::kMoeMlp, dense_here = kind & ActShape::kDenseMlp;
    l = shared;
    if (!dense_here) l.fch = l.fch_gelu = {};  // the shared dense views: not this layer's
    if (rc != Recompute::Full) {
      l.ln1 = c.keep_act(Ns * s.C);
      l.ln1_mean = mean_keep();
      l.ln1_rstd = c.keep(Ns);
      l.qkv = c.keep_act(BT * Cqkv);
    }
    if (rc == Recompute::None) {
      l.atty = c.keep_act(BT * s.Cl);
      l.lse = c.keep(s.B * s.NH * s.T);
    }
    if (rc != Recompute::Full) {
      l.res_mid = c.keep(Ns * s.C);
      l.ln2 = c.keep_act(Ns * s.C);
      l.ln2_mean = mean_keep();
      l.ln2_rstd = c.keep(Ns);
      if (dense_here) l.fch = c.keep_act(BT * Ff);
    }
    if (rc == Recompute::None && dense_here) l.fch_gelu = c.keep_act(BT * s.F);
    // Always kept: the next layer's input (or the stage's output).
    l.res_out = c.keep(Ns * s.C);
    if (moe_here) carve_moe(l.moe, s, c);
    if (moe_here && s.ep > 1) carve_ep_moe(l.ep_moe, s, c);
  }
  if (s.has_head) {
    a.lnf = c.keep_act(Ns * s.C);
    a.lnf_mean = mean_keep();
    a.lnf_rstd = c.keep(Ns);
    a.logits = c.keep(BT * s.V);
    a.ce_lse = c.keep(BT);
    a.losses = c.keep(BT);
    a.ce_sums = c.keep(2 * BT);
  } else {  // a stage without the head: no head views (a may be re-carved)
    a.lnf = {};
    a.lnf_mean = a.lnf_rstd = a.logits = a.ce_lse = a.losses = a.ce_sums = nullptr;
  }
  a.dresid = c.temp(Ns * s.C);
  a.dln = c.temp(BT * s.C);
  a.dqkv = c.temp(BT * Cqkv);
  a.datty = c.temp(BT * s.Cl);
  a.dfch = dense_mlp ? c.temp(BT * Ff) : nullptr;
  a.dact = s.swiglu && dense_mlp ? c.temp(BT * s.F) : nullptr;
  a.tp_full = s.sp() ? c.temp(BT * s.C) : nullptr;
  const int64_t R = moe ? s.R() : 0;
  a.moe_dys = moe ? c.temp(R * s.C) : nullptr;
  a.moe_dact = moe ? c.temp(R * s.F) : nullptr;
  a.moe_dh = moe ? c.temp(R * Ff) : nullptr;
  a.moe_dxs = moe ? c.temp(R * s.C) : nullptr;
  a.moe_dgates = moe ? c.temp(BT * s.K) : nullptr;
  a.moe_dlogits = moe ? c.temp(BT * s.E) : nullptr;
  if (moe && s.ep > 1) {
    const int64_t Rx = s.ep * R;
    a.ep_scratch = {c.temp(Rx * s.C), c.temp(Rx * s.C), c.temp(Rx * s.F), c.temp(Rx * Ff),
                    c.temp(Rx * s.C)};
  }
  const bool shared_expert = moe && s.S > 0;
  a.moe_sh_dy = shared_expert && s.shared_gate ? c.temp(BT * s.C) : nullptr;
  a.moe_sh_dact = shared_expert ? c.temp(BT * s.S) : nullptr;
  a.moe_sh_dh = shared_expert ? c.temp(BT * s.Sf()) : nullptr;
  a.moe_sh_dgate = shared_expert && s.shared_gate ? c.temp(BT) : nullptr;
  a.moe_sh_y = shared_expert && !s.shared_gate ? c.temp(BT * s.C) : nullptr;
  if (shared_expert && !s.shared_gate)
    for (LayerActs& l : layers) l.moe.sh_y = a.moe_sh_y;
}

Carver count(const ActShape& s) {
  Carver c{nullptr, nullptr, s.precision};
  Activations unused;
  carve(unused, s, c);
  return c;
}

}  // namespace

int64_t activations_saved_bytes(const ActShape& s) { return count(s).saved; }
int64_t activations_scratch_bytes(const ActShape& s) { return count(s).scratch; }
ActShape act_shape_of(const GPTConfig& m, int64_t B, int64_t tp, bool sequence_parallel,
                      int64_t layers, bool has_head, int64_t vocab_columns, Recompute recompute,
                      Precision precision) {
  ActShape s;
  s.B = B;
  s.T = m.seq_length;
  s.C = m.hidden_size;
  s.NH = m.num_heads / tp;
  s.Cl = m.hidden_size / tp;
  s.F = m.ffn() / tp;
  s.KVH = m.kv_heads() / tp;
  s.rmsnorm = m.rmsnorm();
  s.swiglu = m.swiglu;
  s.rotary_base = m.rope() ? m.rotary_base : 0.0f;
  s.norm_epsilon = m.norm_epsilon;
  s.V = vocab_columns;
  s.L = layers;
  s.has_head = has_head;
  s.recompute = recompute;
  s.precision = precision;  // 16-bit GEMM activations under --bf16 / --fp16
  if (m.moe()) {
    s.E = m.num_experts;
    s.K = m.moe_router_topk;
    s.capacity = m.moe_capacity(B * m.seq_length);
    s.moe_aux_coeff = m.moe_aux_coeff();
    s.moe_z_coeff = m.moe_z_loss_coeff;
    s.moe_pre_softmax = m.moe_router_pre_softmax;
    s.moe_aux_group = m.moe_load_balancing == MoeLoadBalancing::SeqAuxLoss ? m.seq_length
                                                                            : B * m.seq_length;
    s.moe_layer_freq = m.moe_layer_freq;
    s.S = m.moe_shared_expert_intermediate_size / tp;  // split over tp as the dense MLP
    s.shared_gate = m.moe_shared() && m.moe_shared_expert_gate;
  }
  if (sequence_parallel && tp > 1) {
    TESSERA_CHECK(m.seq_length % tp == 0,
                  "sequence parallelism: sequence length {} does not divide over tp {}",
                  m.seq_length, tp);
    s.Ts = m.seq_length / tp;
  }
  return s;
}

void set_layer_kinds(ActShape& s, const GPTConfig& m, const std::vector<int64_t>& layers,
                     int64_t chunks) {
  const int64_t per = int64_t(layers.size()) / chunks;
  s.mlp_kinds.assign(size_t(per), 0);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t i = 0; i < per; ++i)
      s.mlp_kinds[size_t(i)] |=
          m.moe_layer(layers[size_t(k * per + i)]) ? ActShape::kMoeMlp : ActShape::kDenseMlp;
}

int64_t activations_bytes(const ActShape& s) {
  const Carver c = count(s);
  return c.saved + c.scratch;
}

// The arena is a float Buffer; every count is a multiple of 64 bytes.
void activations_init(Activations& a, const ActShape& s) {
  const Carver n = count(s);
  a.s = s;
  a.arena.allocate((n.saved + n.scratch) / 4);
  char* base = static_cast<char*>(a.arena.data());
  Carver c{base, base + n.saved, s.precision};
  carve(a, s, c);
}

void activations_init(Activations& a, const ActShape& s, float* scratch) {
  a.s = s;
  a.arena.allocate(count(s).saved / 4);
  Carver c{static_cast<char*>(a.arena.data()), reinterpret_cast<char*>(scratch), s.precision};
  carve(a, s, c);
}

void activations_place(Activations& a, const ActShape& s, char* base) {
  TESSERA_CHECK(base, "activations_place: null base");
  const Carver n = count(s);
  a.s = s;
  a.arena = Buffer{};
  Carver c{base, base + n.saved, s.precision};
  carve(a, s, c);
}

}  // namespace tessera
