#include "tessera/model/expert_parallel.h"

#include <cstring>
#include <span>

#include "tessera/core/error.h"
#include "tessera/model/moe_layer.h"

namespace tessera {

EpRowTable ep_row_table(const float* all_counts, int64_t ep, int64_t rank, int64_t E, int64_t R,
                        MoeDispatcher dispatcher) {
  const int64_t El = E / ep;
  // n(i, e): rows source rank i sends to this rank's local expert e.
  auto n = [&](int64_t i, int64_t e) { return int64_t(all_counts[i * E + rank * El + e]); };
  EpRowTable t;
  t.from.assign(size_t(El * ep), 0);
  t.to.assign(size_t(El * ep), 0);
  t.rows.assign(size_t(El * ep), 0);
  t.expert_rows.assign(size_t(El), 0);
  t.send.assign(size_t(ep), 0);
  t.recv.assign(size_t(ep), 0);
  for (int64_t j = 0; j < ep; ++j)
    for (int64_t e = 0; e < El; ++e) t.send[size_t(j)] += size_t(all_counts[rank * E + j * El + e]);
  // The source-major buffer: alltoall packs each source's block after the
  // last; allgather holds source i's R sorted rows at i R, whose rows for
  // experts before this rank's come first.
  int64_t packed = 0;
  for (int64_t i = 0; i < ep; ++i) {
    int64_t from = packed;
    if (dispatcher == MoeDispatcher::AllGather) {
      from = i * R;
      for (int64_t g = 0; g < rank * El; ++g) from += int64_t(all_counts[i * E + g]);
    }
    for (int64_t e = 0; e < El; ++e) {
      const size_t k = size_t(e * ep + i);
      t.from[k] = from;
      t.rows[k] = n(i, e);
      from += n(i, e);
      t.recv[size_t(i)] += size_t(n(i, e));
      t.expert_rows[size_t(e)] += int32_t(n(i, e));
    }
    packed += int64_t(t.recv[size_t(i)]);
  }
  // The expert-major buffer: expert e's rows, source 0's first.
  int64_t to = 0;
  for (int64_t e = 0; e < El; ++e)
    for (int64_t i = 0; i < ep; ++i) {
      const size_t k = size_t(e * ep + i);
      t.to[k] = to;
      to += t.rows[k];
    }
  t.received = to;
  return t;
}

LayerWeights ep_local_experts(const LayerWeights& w, const ActShape& s, int64_t ep, int64_t r) {
  const int64_t El = s.E / ep;
  LayerWeights out = w;
  auto slice = [&](float* p, int64_t per_expert) { return p ? p + r * El * per_expert : nullptr; };
  out.experts_fc_w = slice(w.experts_fc_w, s.Ff() * s.C);
  out.experts_fc_b = slice(w.experts_fc_b, s.Ff());
  out.experts_proj_w = slice(w.experts_proj_w, s.C * s.F);
  out.experts_proj_b = slice(w.experts_proj_b, s.C);
  return out;
}

namespace {

// Rows between the exchanged (source-major) and the expert-major order, C
// elements of `dtype` each (fp32, or the run's 16-bit format: the bits move
// unchanged); to_experts picks, !to_experts puts back.
void reorder_rows(const kernels::Ops& ops, const EpRowTable& t, void* dst, const void* src,
                  int64_t C, Precision dtype, bool to_experts) {
  ProfileScope scope(ops.profile(), Op::Residual);
  const size_t row = size_t(C) * dtype_size(dtype);  // bytes
  auto* d8 = static_cast<char*>(dst);
  const auto* s8 = static_cast<const char*>(src);
  for (size_t k = 0; k < t.rows.size(); ++k) {
    if (t.rows[k] == 0) continue;
    const int64_t d = to_experts ? t.to[k] : t.from[k];
    const int64_t s = to_experts ? t.from[k] : t.to[k];
    std::memcpy(d8 + size_t(d) * row, s8 + size_t(s) * row, size_t(t.rows[k]) * row);
  }
}

// The expert side's kept rows in the run's precision, that of one
// process's MoeActs xs, h and act (16-bit under --bf16 / --fp16): EpMoeActs
// carves them fp32-sized, and a 16-bit run uses the first half of each.
struct ExpertRows {
  kernels::Act xe, h, act;  // (rr, C), (rr, Ff), (rr, F)
};
ExpertRows expert_rows(const EpMoeActs& x, Precision dtype) {
  return {view_as(x.xe, dtype), view_as(x.h, dtype), view_as(x.act, dtype)};
}

// Element counts of the alltoall's blocks from its row counts.
std::vector<size_t> elements(const std::vector<size_t>& rows, int64_t C) {
  std::vector<size_t> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) out[i] = rows[i] * size_t(C);
  return out;
}

// src (R, C): this rank's expert-sorted rows, in their own precision ->
// xfer, source-major rows for this rank's experts (every rank's R rows
// under allgather), in the same precision.
void send_to_experts(const kernels::Ops& ops, const ExpertParallel& ep, const EpRowTable& t,
                     kernels::ConstAct src, float* xfer, int64_t R, int64_t C) {
  ProfileScope scope(ops.profile(), Op::Comm);
  if (ep.dispatcher == MoeDispatcher::AllToAll)
    ep.group->all_to_all(src.p, elements(t.send, C), xfer, elements(t.recv, C), src.dtype);
  else
    ep.group->all_gather(src.p, xfer, size_t(R * C), src.dtype);
}

// xe (rr, C) expert-major fp32 rows computed here -> dst (R, C) on the
// ranks the rows came from, in their expert-sorted order. xfer: staging.
// fp32 in every precision: one process keeps these rows (ys, and dxs for
// the router's and permute's backward) in fp32 too.
void return_to_sources(const kernels::Ops& ops, const ExpertParallel& ep, const EpRowTable& t,
                       const float* xe, float* xfer, float* dst, int64_t R, int64_t C) {
  if (ep.dispatcher == MoeDispatcher::AllGather) {
    // Zero where this rank computed nothing: the reduce-scatter's sum then
    // gives each row the one rank's value that computed it, exactly.
    ProfileScope scope(ops.profile(), Op::Residual);
    std::memset(xfer, 0, size_t(ep.size() * R * C) * sizeof(float));
  }
  reorder_rows(ops, t, xfer, xe, C, Precision::Fp32, /*to_experts=*/false);
  ProfileScope scope(ops.profile(), Op::Comm);
  if (ep.dispatcher == MoeDispatcher::AllToAll)
    ep.group->all_to_all(xfer, elements(t.recv, C), dst, elements(t.send, C), Precision::Fp32);
  else
    ep.group->reduce_scatter(xfer, dst, size_t(R * C), Precision::Fp32, comm::ReduceOp::Sum);
}

const ExpertParallel& check_ep(const EpMoeActs& x, const ActShape& s) {
  TESSERA_CHECK(x.ep && x.ep->active() && x.scratch,
                "moe_*_ep needs an expert-parallel group of 2 or more ranks and its scratch");
  const ExpertParallel& ep = *x.ep;
  TESSERA_CHECK(s.E % ep.size() == 0, "{} experts do not split over {} expert-parallel ranks",
                s.E, ep.size());
  return ep;
}

}  // namespace

void moe_forward_ep(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                    const EpMoeActs& x, kernels::ConstAct ln2, float* out, const ActShape& s) {
  moe_route_and_sort(ops, w, m, ln2, s);
  moe_experts_forward_ep(ops, w, m, x, s);
  ops.moe_combine_forward(out, m.ys, m.gates, m.slot, s.N(), s.K, s.C);
}

void moe_experts_forward_ep(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                            const EpMoeActs& x, const ActShape& s) {
  const ExpertParallel& ep = check_ep(x, s);
  const EpMoeScratch& xs = *x.scratch;
  const int64_t C = s.C, E = s.E, R = s.R(), P = ep.size();
  const int64_t El = E / P;
  {
    // Every rank's rows per expert: the exchange's sizes and the order of
    // the rows each rank receives.
    std::vector<float> mine(static_cast<size_t>(E));  // (E)
    for (int64_t e = 0; e < E; ++e) mine[size_t(e)] = float(m.counts[e]);
    ProfileScope scope(ops.profile(), Op::Comm);
    ep.group->all_gather(std::span<const float>(mine), std::span<float>(x.all_counts, size_t(P * E)));
  }
  const EpRowTable t = ep_row_table(x.all_counts, P, ep.rank(), E, R, ep.dispatcher);
  const int64_t rr = t.received;
  // The ln2 rows travel in the run's precision (what one process's expert
  // GEMM reads: xs is 16-bit under --bf16 / --fp16), so the experts see
  // one process's bits.
  send_to_experts(ops, ep, t, m.xs, xs.xfer, R, C);
  const ExpertRows v = expert_rows(x, m.xs.dtype);
  reorder_rows(ops, t, v.xe.p, xs.xfer, C, v.xe.dtype, /*to_experts=*/true);  // (rr, C)
  float* ye = xs.dye;  // (rr, C) fp32 as one process's ys: backward's scratch, free in forward
  moe_experts_forward(ops, w, {v.xe, v.h, v.act, t.expert_rows.data(), rr, El}, ye, s);
  return_to_sources(ops, ep, t, ye, xs.xfer, m.ys, R, C);  // (R, C) as one process's ys
}

void moe_backward_ep(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                     const MoeActs& m, const EpMoeActs& x, kernels::ConstAct ln2,
                     const float* dout, float* dln2, const Activations& scratch,
                     const ActShape& s, bool add_dw, const TensorParallel& tp) {
  const ExpertParallel& ep = check_ep(x, s);
  const EpMoeScratch& xs = *x.scratch;
  const int64_t N = s.N(), C = s.C, E = s.E, K = s.K, R = s.R(), P = ep.size();
  const int64_t El = E / P;
  // dys (R, C): fp32, or in the GEMM precision under --bf16 / --fp16 (as
  // moe_backward's), and it travels so: the experts' GEMMs read one
  // process's bits. Sent before the next grad_operand reuses its scratch.
  const kernels::Act dys = ops.grad_operand(scratch.moe_dys, R * C);
  ops.moe_combine_backward(dys, scratch.moe_dgates, dout, m.ys, m.gates, m.slot, N, K, C);
  const EpRowTable t = ep_row_table(x.all_counts, P, ep.rank(), E, R, ep.dispatcher);
  const int64_t rr = t.received;
  send_to_experts(ops, ep, t, dys, xs.xfer, R, C);
  const kernels::Act dye = view_as(xs.dye, dys.dtype);             // (rr, C)
  reorder_rows(ops, t, dye.p, xs.xfer, C, dye.dtype, /*to_experts=*/true);
  const ExpertRows v = expert_rows(x, m.xs.dtype);
  moe_experts_backward(ops, w, g, {v.xe, v.h, v.act, t.expert_rows.data(), rr, El}, dye, xs.dact,
                       xs.dh, xs.dxe, s, add_dw);
  return_to_sources(ops, ep, t, xs.dxe, xs.xfer, scratch.moe_dxs, R, C);  // dxs (R, C)
  moe_router_backward(ops, w, g, m, ln2, scratch.moe_dxs, dln2, scratch, s, add_dw, tp);
}

}  // namespace tessera
