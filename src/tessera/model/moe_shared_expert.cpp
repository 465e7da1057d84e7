#include "tessera/model/moe_shared_expert.h"

#include "tessera/model/moe_layer.h"

namespace tessera {

void moe_shared_forward_input(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                              kernels::ConstAct ln2, const ActShape& s) {
  const int64_t N = s.N(), C = s.C;
  ops.matmul_forward(m.sh_h, ln2, w.shared_fc_w, w.shared_fc_b, N, C, s.Sf());  // (N, Sf)
  // The gate's logits (N) into the gate's own view, which the output
  // half's kernel overwrites with their sigmoid (it reads each logit before
  // writing).
  if (s.shared_gate) ops.matmul_forward(m.sh_gate, ln2, w.shared_gate_w, nullptr, N, C, 1);
}

void moe_shared_forward_output(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                               float* out, const ActShape& s) {
  const int64_t N = s.N(), C = s.C, S = s.S;
  if (s.swiglu)
    ops.swiglu_forward(m.sh_act, m.sh_h, N, S);
  else
    ops.gelu_forward(m.sh_act, m.sh_h, N * S);
  ops.matmul_forward(m.sh_y, m.sh_act, w.shared_proj_w, w.shared_proj_b, N, S, C);  // (N, C) fp32
  if (!s.shared_gate) {
    ops.accumulate(out, m.sh_y, N * C);
    return;
  }
  ops.moe_shared_gate_forward(out, m.sh_gate, m.sh_gate, m.sh_y, N, C);
}

void moe_shared_backward_output(const kernels::Ops& ops, const LayerWeights& w,
                                const LayerWeights& g, const MoeActs& m, const float* dout,
                                const Activations& scratch, const ActShape& s,
                                const TensorParallel& tp, bool add_dw) {
  const int64_t N = s.N(), C = s.C, S = s.S;
  // dL/d sh_y (N, C): dout itself without a gate; gate * dout with one,
  // in the GEMM precision (it feeds only the proj's backward GEMM).
  kernels::ConstAct dy = dout;
  if (s.shared_gate) {
    const kernels::Act dyg = view_as(scratch.moe_sh_dy, m.sh_act.dtype);
    ops.moe_shared_gate_backward(dyg, scratch.moe_sh_dgate, dout, m.sh_y, m.sh_gate, N, C);
    // Under tp, sh_y is this rank's partial sum, and so is the gate
    // logits' gradient (linear in it): summed over tp, as one process's.
    tp_all_reduce(tp, scratch.moe_sh_dgate, N, comm::ReduceOp::Sum, ops.profile());
    dy = dyg;
  }
  ops.matmul_backward(scratch.moe_sh_dact, g.shared_proj_w, g.shared_proj_b, dy, m.sh_act,
                      w.shared_proj_w, N, S, C, /*accumulate_dinp=*/false, add_dw);  // (N, S)
}

void moe_shared_backward_input(const kernels::Ops& ops, const LayerWeights& w,
                               const LayerWeights& g, const MoeActs& m, kernels::ConstAct ln2,
                               float* dln2, const Activations& scratch, const ActShape& s,
                               const TensorParallel& tp, bool add_dw) {
  const int64_t N = s.N(), C = s.C, S = s.S;
  // (N, Sf) in sh_h's precision, in its own fp32-sized scratch
  const kernels::Act dh = view_as(scratch.moe_sh_dh, m.sh_h.dtype);
  if (s.swiglu)
    ops.swiglu_backward(dh, m.sh_h, scratch.moe_sh_dact, N, S);
  else
    ops.gelu_backward(dh, m.sh_h, scratch.moe_sh_dact, N * S);
  ops.matmul_backward(dln2, g.shared_fc_w, g.shared_fc_b, dh, ln2, w.shared_fc_w, N, C, s.Sf(),
                      /*accumulate_dinp=*/true, add_dw);
  // dln2 += dglogit @ w_gate, and w_gate's gradient. Under tp dln2 is a
  // partial sum the block reduces over tp, and this share is whole on every
  // rank: tp rank 0 adds it, once. The weight's gradient is the same on all.
  if (s.shared_gate)
    ops.matmul_backward(tp.rank() == 0 ? dln2 : nullptr, g.shared_gate_w, nullptr,
                        scratch.moe_sh_dgate, ln2, w.shared_gate_w, N, C, 1,
                        /*accumulate_dinp=*/true, add_dw);
}

}  // namespace tessera
