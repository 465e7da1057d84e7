// The mixture-of-experts MLP (Megatron-LM's --num-experts family;
// docs/moe.md): in an MoE layer (LayerWeights::moe()) it replaces the dense
// fc -> activation -> proj between the second norm and the residual add.
//
//   logits (N, E) = ln2 @ router^T             matmul (no bias)
//   top-k of the logits, their softmax (gates), capacity drops in token order
//   xs (R, C)     = ln2 rows sorted by expert   moe_permute
//   h  (R, Ff)    = xs @ fc[e]^T + b            one grouped GEMM for all experts
//   act (R, F)    = GELU(h) or SwiGLU(h)
//   ys (R, C)     = act @ proj[e]^T + b         one grouped GEMM
//   out (N, C)    = sum_k gate * ys[slot]       moe_combine
//
// Every step is a Backend kernel (backend_methods.inc), so the op trace
// records the layer as it records the dense one. The load-balancing
// (aux) and z-losses are means over the micro-batch's N tokens: backward
// adds their gradient, scaled by Activations::moe_loss_scale, to the
// router's; moe_route_forward's stats report their values.
//
// Tensor parallelism (Megatron's experts under TP): every tp rank runs the
// layer on the same N rows (the full ln2: under sequence parallelism the
// gathered rows, as the dense MLP's fc reads) with the replicated router,
// so all route alike; each expert's fc (and SwiGLU gate) is split by
// columns and its proj by rows over tp (ParamLayout), so each rank's
// output is a partial sum the block reduces over tp as the dense MLP's
// (all-reduce, or reduce-scatter under SP). Backward sums the gates'
// gradients over tp (N K numbers) and adds the router's (and the shared
// gate's) share of dL/d ln2 on tp rank 0 only. Expert parallelism:
// model/expert_parallel.h (its group joins ranks at one tp index, each
// holding that tp slice of its experts).
#pragma once
#include "tessera/kernels/ops.h"
#include "tessera/model/activations.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

// The layer's first and last steps, which an expert-parallel layer
// (model/expert_parallel.h) shares: the router's logits, the routing and
// capacity, and ln2's kept rows sorted by expert into m.xs (R, C); and,
// from dxs (R, C) = dL/d those rows, dln2 (N, C) written with the router's
// share added and the router's weight gradient.
void moe_route_and_sort(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                        kernels::ConstAct ln2, const ActShape& s);
// Under tensor parallelism (tp active; model/moe_layer.h's header) the
// gates' gradients are summed over tp first and the router's share of
// dln2 is added by tp rank 0 alone.
void moe_router_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                         const MoeActs& m, kernels::ConstAct ln2, const float* dxs, float* dln2,
                         const Activations& scratch, const ActShape& s, bool add_dw,
                         const TensorParallel& tp = {});

// The experts' MLP over rows sorted by expert, shared by one process's
// layer (all E experts, R rows) and an expert-parallel rank's (its El
// experts, the rows it received): one grouped GEMM for every expert's fc,
// the activation, one grouped GEMM for their proj. `groups` experts of
// `w`'s stacked views (the first groups of them), counts (groups) rows each,
// `rows` rows in the buffers. xs (rows, C), h (rows, Ff) and act (rows, F)
// in the run's precision (kept for backward), ys (rows, C) fp32. Rows past
// the counted ones hold stale values that nothing reads.
struct ExpertMlpRows {
  kernels::Act xs, h, act;  // (rows, C), (rows, Ff), (rows, F)
  const int32_t* counts = nullptr;  // (groups)
  int64_t rows = 0, groups = 0;
};
void moe_experts_forward(const kernels::Ops& ops, const LayerWeights& w, const ExpertMlpRows& v,
                         float* ys, const ActShape& s);
// dys (rows, C) = dL/d ys, fp32 or 16-bit (it feeds only the proj GEMM's
// backward) -> dxs (rows, C) fp32 written; the experts' gradients into g's
// stacked views (written when !add_dw). dact (rows, F) fp32 scratch; dh:
// an fp32-sized (rows, Ff) scratch, used in h's precision (a 16-bit run
// writes the first half: the activation's backward rounds once and the fc
// GEMM's backward casts nothing).
void moe_experts_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                          const ExpertMlpRows& v, kernels::ConstAct dys, float* dact, float* dh,
                          float* dxs, const ActShape& s, bool add_dw);

// A view of `dtype` over an fp32-sized buffer (a 16-bit view uses its first
// half): scratch carved fp32-sized that a 16-bit run fills in 16 bits.
inline kernels::Act view_as(float* p, Precision dtype) {
  if (dtype == Precision::Fp32) return p;
  return kernels::Act(reinterpret_cast<uint16_t*>(p), dtype);
}

// ln2 (N, C) -> out (N, C) (written), filling the views of m.
void moe_forward(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                 kernels::ConstAct ln2, float* out, const ActShape& s);

// The whole MoE MLP of a layer, ln2 (N, C) -> out (N, C) written: the
// routed experts (all E here, or under expert parallelism, x.ep non-null,
// this rank's share with the tokens exchanged over the ep group), then the
// shared expert when the model has one (ActShape::S > 0), on every token.
// The one place the two are paired: the training block and the KV-cache
// decoder (model/generate.cpp) both call it. ln2 is read before out is
// written, so out may overlay it. Under tensor parallelism out is this
// rank's partial sum (its slice of every expert's width), which the caller
// reduces over tp as the dense MLP's row-parallel output.
void moe_mlp_forward(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                     const EpMoeActs& x, const TensorParallel& tp, kernels::ConstAct ln2,
                     float* out, const ActShape& s);

// dout (N, C) = dL/d out -> dln2 (N, C) written; the experts' and router's
// gradients into g (written instead of added when !add_dw, the step's
// first backward). `scratch` supplies the moe_* scratch and moe_loss_scale.
void moe_backward(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                  const MoeActs& m, kernels::ConstAct ln2, const float* dout, float* dln2,
                  const Activations& scratch, const ActShape& s, bool add_dw,
                  const TensorParallel& tp = {});

}  // namespace tessera
