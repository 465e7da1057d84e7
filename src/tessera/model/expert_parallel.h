// Expert parallelism for the MoE layer (issue 35 item 2; docs/moe.md): the
// E experts of an MoE layer are spread over the ep ranks of the expert-
// parallel group (comm::Grid::ep()), rank r holding the El = E / ep
// experts [r El, (r + 1) El). Each rank routes its own micro-batch exactly
// as one process does (moe_route_forward: top-k, ties, and the capacity
// drops in the micro-batch's token order, so the drops equal the single
// process's), sorts the kept choices by expert (moe_permute_forward), and
// then, instead of running all E experts itself:
//
//   counts  all-gather every rank's rows per expert        (ep, E)
//   send    each rank the rows of its experts              alltoall | allgather
//   reorder the rows received to expert-major order        (rr, C), rr = rows for my experts
//   experts one grouped GEMM, activation, grouped GEMM     over the El local experts
//   return  the output rows to the ranks they came from    alltoall | reduce-scatter
//   combine on the source rank, as one process does
//
// alltoall moves each row once each way (an alltoallv, sizes from the
// counts); allgather gathers every rank's sorted rows on every rank, each
// keeps the rows of its experts, and a reduce-scatter of the results (zero
// where a rank holds nothing) brings each source its rows back: more bytes,
// no size exchange in the data path. Backward runs the same exchange for
// the gradients. Within an expert the rows are ordered by source rank, then
// token, so every run of a layout is deterministic; the rows' products equal
// one process's, the weight gradients are the same sums in another order.
//
// The communication is charged to the profile's comm kind, the reorders to
// residual (as the other MoE row passes); the communicator logs, counts and
// watches every call. Under --bf16 / --fp16 the rows a GEMM reads travel in
// the run's 16-bit format (the ln2 rows forward, dL/d the experts' output
// backward: one process holds them so too), the rows coming back in fp32
// (the experts' output and dL/d their input, fp32 in one process as well),
// so every expert computes on one process's bits.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/config/parallel_config.h"
#include "tessera/kernels/ops.h"
#include "tessera/model/activations.h"
#include "tessera/model/tensor_parallel.h"
#include "tessera/model/weights.h"

namespace tessera {

struct ExpertParallel {
  comm::Communicator* group = nullptr;  // the ep group; null or size 1: no expert parallelism
  MoeDispatcher dispatcher = MoeDispatcher::AllToAll;

  bool active() const { return group != nullptr && group->size() > 1; }
  int64_t size() const { return active() ? group->size() : 1; }
  int64_t rank() const { return active() ? group->rank() : 0; }
};

// Rows an expert-parallel rank may receive for its experts in one layer
// (Rx): every rank's R() kept rows in the worst case (all of them chose its
// experts). The allgather dispatcher gathers exactly that many. The views
// (EpMoeActs, EpMoeScratch: model/activations.h) hold that many rows.
inline int64_t ep_expert_rows(const ActShape& s, int64_t ep) { return ep * s.R(); }

// The views of rank r's experts in w holding all E of them: experts
// [r El, (r + 1) El) of each stacked tensor, El = E / ep; the router and
// everything else as in w. The same for a gradient's views. (The engine's
// layout holds only a rank's El experts already, ParamEntry::ep_split; this
// cuts a one-process stack the same way, for a reference to compare with.)
LayerWeights ep_local_experts(const LayerWeights& w, const ActShape& s, int64_t ep, int64_t r);

// Where the rows of (local expert e, source rank i) sit: `from` in the
// exchanged (source-major) buffer, `to` in the expert-major one; `rows` of
// them. Row units; index e * ep + i. From the all-gathered counts.
struct EpRowTable {
  std::vector<int64_t> from, to, rows;
  std::vector<int32_t> expert_rows;  // (El) rows per local expert (the grouped GEMMs' counts)
  std::vector<size_t> send, recv;    // (ep) rows sent to / received from each rank (alltoall)
  int64_t received = 0;              // rr: rows for this rank's experts
};
// all_counts (ep, E); R: each rank's sorted rows (the allgather dispatcher's
// block stride). alltoall's source-major buffer packs the blocks of the
// ranks one after another; allgather's puts rank i's at i R.
EpRowTable ep_row_table(const float* all_counts, int64_t ep, int64_t rank, int64_t E, int64_t R,
                        MoeDispatcher dispatcher);

// ln2 (N, C) -> out (N, C) (written), filling m's source-side views and
// x's expert side; x.ep is the group, x.scratch the shared scratch. w's
// expert views hold this rank's El experts (ep_local_experts).
void moe_forward_ep(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                    const EpMoeActs& x, kernels::ConstAct ln2, float* out, const ActShape& s);

// moe_forward_ep's middle: from m's routed and sorted rows (moe_route_and_sort
// has run) to m.ys (R, C), the experts' output rows back on this rank, as
// one process's; moe_mlp_forward runs it between the routing and the combine.
void moe_experts_forward_ep(const kernels::Ops& ops, const LayerWeights& w, const MoeActs& m,
                            const EpMoeActs& x, const ActShape& s);

// As moe_backward: dout (N, C) -> dln2 (N, C) written; the router's and
// this rank's experts' gradients into g (its expert views: this rank's El
// experts; written when !add_dw). `scratch` supplies the source-side moe_*
// scratch and moe_loss_scale. Each expert's gradient is the sum over every
// ep rank's rows for it; the router's, this rank's micro-batch's share.
void moe_backward_ep(const kernels::Ops& ops, const LayerWeights& w, const LayerWeights& g,
                     const MoeActs& m, const EpMoeActs& x, kernels::ConstAct ln2,
                     const float* dout, float* dln2, const Activations& scratch,
                     const ActShape& s, bool add_dw, const TensorParallel& tp = {});

}  // namespace tessera
