#include "tessera/model/moe_layer.h"

#include "tessera/model/expert_parallel.h"
#include "tessera/model/moe_shared_expert.h"

namespace tessera {

void moe_route_and_sort(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                        kernels::ConstAct ln2, const ActShape& s) {
  const int64_t N = s.N(), C = s.C, E = s.E, K = s.K;
  ops.matmul_forward(m.logits, ln2, w.router_w, nullptr, N, C, E);  // (N, E)
  ops.moe_route_forward(m.idx, m.gates, m.slot, m.counts, m.stats, m.logits, N, E, K,
                        s.capacity, s.moe_aux_group, s.moe_pre_softmax);
  ops.moe_permute_forward(m.xs, ln2, m.slot, N, K, C);  // (R, C)
}

void moe_router_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                         const MoeActs& m, kernels::ConstAct ln2, const float* dxs, float* dln2,
                         const Activations& scratch, const ActShape& s, bool add_dw,
                         const TensorParallel& tp) {
  const int64_t N = s.N(), C = s.C, E = s.E, K = s.K;
  ops.moe_permute_backward(dln2, dxs, m.slot, N, K, C);  // (N, C) written
  // Under tp the experts' output rows were partial sums over tp, and so
  // are the gates' gradients (linear in them): summed here (N, K), the
  // routing's backward then runs on the same numbers on every tp rank.
  tp_all_reduce(tp, scratch.moe_dgates, N * K, comm::ReduceOp::Sum, ops.profile());
  const float scale = scratch.moe_loss_scale;
  ops.moe_route_backward(scratch.moe_dlogits, scratch.moe_dgates, m.logits, m.idx, m.gates, N, E,
                         K, s.moe_aux_group, scale * s.moe_aux_coeff, scale * s.moe_z_coeff,
                         s.moe_pre_softmax);
  // The router: dln2 += dlogits @ router, and its weight's gradient (the
  // same on every tp rank: the router is replicated). Under tp dln2 is a
  // partial sum the block reduces over tp, and this share is whole on
  // every rank: tp rank 0 adds it, once.
  ops.matmul_backward(tp.rank() == 0 ? dln2 : nullptr, g.router_w, nullptr, scratch.moe_dlogits,
                      ln2, w.router_w, N, C, E, /*accumulate_dinp=*/true, add_dw);
}

void moe_experts_forward(const kernels::Ops& ops, const LayerWeights& w, const ExpertMlpRows& v,
                         float* ys, const ActShape& s) {
  const int64_t R = v.rows, C = s.C;
  ops.grouped_matmul_forward(v.h, v.xs, w.experts_fc_w, w.experts_fc_b, v.counts, R, v.groups, C,
                             s.Ff());  // (R, Ff)
  // Over all R rows: under a capacity (or past the rows an expert-parallel
  // rank received) the rows past the kept ones hold stale values that
  // nothing reads.
  if (s.swiglu)
    ops.swiglu_forward(v.act, v.h, R, s.F);
  else
    ops.gelu_forward(v.act, v.h, R * s.F);
  ops.grouped_matmul_forward(ys, v.act, w.experts_proj_w, w.experts_proj_b, v.counts, R, v.groups,
                             s.F, C);  // (R, C) fp32
}

void moe_experts_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                          const ExpertMlpRows& v, kernels::ConstAct dys, float* dact, float* dh,
                          float* dxs, const ActShape& s, bool add_dw) {
  const int64_t R = v.rows, C = s.C, F = s.F;
  ops.grouped_matmul_backward(dact, g.experts_proj_w, g.experts_proj_b, dys, v.act,
                              w.experts_proj_w, v.counts, R, v.groups, F, C, add_dw);
  // (R, Ff) in h's precision, in dh's own (fp32-sized) scratch: not the
  // low-precision grad_operand slot, which dys may occupy.
  const kernels::Act dh16 = view_as(dh, v.h.dtype);
  if (s.swiglu)
    ops.swiglu_backward(dh16, v.h, dact, R, F);
  else
    ops.gelu_backward(dh16, v.h, dact, R * F);
  ops.grouped_matmul_backward(dxs, g.experts_fc_w, g.experts_fc_b, dh16, v.xs, w.experts_fc_w,
                              v.counts, R, v.groups, C, s.Ff(), add_dw);
}

void moe_forward(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                 kernels::ConstAct ln2, float* out, const ActShape& s) {
  const int64_t N = s.N(), C = s.C, K = s.K;
  moe_route_and_sort(ops, w, m, ln2, s);
  moe_experts_forward(ops, w, {m.xs, m.h, m.act, m.counts, s.R(), s.E}, m.ys, s);
  ops.moe_combine_forward(out, m.ys, m.gates, m.slot, N, K, C);
}

void moe_mlp_forward(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                     const EpMoeActs& x, const TensorParallel& tp, kernels::ConstAct ln2,
                     float* out, const ActShape& s) {
  // Under tp out is this rank's partial sum: tp rank 0 alone adds the
  // row-parallel biases (the experts' proj, the shared expert's proj).
  LayerWeights wl = w;
  if (tp.rank() != 0) wl.experts_proj_b = wl.shared_proj_b = nullptr;
  moe_route_and_sort(ops, w, m, ln2, s);
  // ln2's last reader, so out may overlay it (under SP both are the
  // gathered rows' buffer).
  if (s.S > 0) moe_shared_forward_input(ops, w, m, ln2, s);
  // The experts' rows: all E here, or this rank's share exchanged over ep
  // (w then holds this rank's E / ep experts: ParamLayout splits them).
  if (x.ep)
    moe_experts_forward_ep(ops, wl, m, x, s);
  else
    moe_experts_forward(ops, wl, {m.xs, m.h, m.act, m.counts, s.R(), s.E}, m.ys, s);
  ops.moe_combine_forward(out, m.ys, m.gates, m.slot, s.N(), s.K, s.C);
  if (s.S > 0) moe_shared_forward_output(ops, wl, m, out, s);  // every token, here
}

void moe_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                  const MoeActs& m, kernels::ConstAct ln2, const float* dout, float* dln2,
                  const Activations& scratch, const ActShape& s, bool add_dw,
                  const TensorParallel& tp) {
  const int64_t N = s.N(), C = s.C, K = s.K, R = s.R();
  // (R, C): fp32, or in the GEMM precision under --bf16 / --fp16
  const kernels::Act dys = ops.grad_operand(scratch.moe_dys, R * C);
  ops.moe_combine_backward(dys, scratch.moe_dgates, dout, m.ys, m.gates, m.slot, N, K, C);
  moe_experts_backward(ops, w, g, {m.xs, m.h, m.act, m.counts, R, s.E}, dys, scratch.moe_dact,
                       scratch.moe_dh, scratch.moe_dxs, s, add_dw);
  moe_router_backward(ops, w, g, m, ln2, scratch.moe_dxs, dln2, scratch, s, add_dw, tp);
}

}  // namespace tessera
