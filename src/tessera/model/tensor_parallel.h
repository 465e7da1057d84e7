// Tensor parallelism (Megatron-style) as the model sees it: the group, the
// sequence-parallel switch, and the two conjugate communication pairs every
// tensor-parallel linear is wrapped in. block.cpp and gpt.cpp call only these.
//
// A tp region is entered before a column-parallel linear (QKV, MLP fc, the
// vocab-parallel LM head) and left after a row-parallel one (attention proj,
// MLP proj, the vocab-parallel token embedding):
//
//                   forward                      backward
//   enter   no SP:  identity                     all-reduce dX
//           SP:     all-gather X (rows)          reduce-scatter dX (rows)
//   leave   no SP:  all-reduce Y                 identity
//           SP:     reduce-scatter Y (rows)      all-gather dY (rows)
//
// Sequence-parallel layout: of a micro-batch's N = B*T token rows, flattened
// in (B, T) order, tp rank r holds the contiguous block of rows
// [r*N/tp, (r+1)*N/tp) in every LayerNorm / residual / dropout region. With
// B = 1 that is T/tp tokens of the sequence; for B > 1 a block may straddle
// two sequences, which the token-wise ops there do not care about, and it
// makes every all-gather and reduce-scatter one contiguous block per rank
// (no transposes). Positions are recovered from the global row index.
// Under context parallelism the N rows are the cp rank's B x T/cp, and a
// block's positions come run by run from its chunks (context_parallel.h).
#pragma once
#include <cstdint>

#include "tessera/comm/communicator.h"
#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/kernels/precision.h"

namespace tessera {

struct TensorParallel {
  comm::Communicator* group = nullptr;  // the tp group; null or size 1: no tensor parallelism
  bool sequence_parallel = false;       // --sequence-parallel (ignored without a tp group)

  bool active() const { return group != nullptr && group->size() > 1; }
  bool sp() const { return active() && sequence_parallel; }
  int64_t size() const { return active() ? group->size() : 1; }
  int64_t rank() const { return active() ? group->rank() : 0; }
  // Rows of the sequence-parallel regions held here out of N: N/tp with SP, else N.
  int64_t region_rows(int64_t N) const { return sp() ? N / size() : N; }
  // Global row (of the N) of this rank's first region row: rank * N/tp with SP, else 0.
  int64_t region_row0(int64_t N) const { return sp() ? rank() * (N / size()) : 0; }
};

// ---- enter a tp region (before a column-parallel linear) ----
// x (rows, C) on this rank -> the (N, C) input the linear needs. Without SP
// returns x itself (rows = N, nothing moves); with SP gathers into `full`
// (N, C) and returns it.
const float* tp_enter_forward(const TensorParallel& tp, const float* x, float* full, int64_t N,
                              int64_t C, Profile* prof = nullptr);
// The same for a stored activation view (--bf16 / --fp16: a 16-bit
// LayerNorm output, gathered in 16 bits, half the bytes, into `full` used as
// (N, C) 16-bit words; fp32 views as above).
kernels::ConstAct tp_enter_forward(const TensorParallel& tp, kernels::ConstAct x, float* full,
                                   int64_t N, int64_t C, Profile* prof = nullptr);
// dfull (N, C): this rank's partial input gradient. Without SP sums it over
// tp in place and returns it; with SP reduce-scatters it in place and
// returns this rank's (N/tp, C) block inside dfull.
float* tp_enter_backward(const TensorParallel& tp, float* dfull, int64_t N, int64_t C,
                         Profile* prof = nullptr);

// ---- leave a tp region (after a row-parallel linear) ----
// partial (N, C): this rank's partial product. Without SP sums it over tp
// in place (y must be partial: nothing is copied); with SP reduce-scatters
// it into y (N/tp, C).
void tp_leave_forward(const TensorParallel& tp, float* partial, float* y, int64_t N, int64_t C,
                      Profile* prof = nullptr);
// dy (rows, C): gradient of the region's rows. Without SP returns dy; with SP
// gathers all ranks' rows into `full` (N, C) and returns it.
const float* tp_leave_backward(const TensorParallel& tp, const float* dy, float* full, int64_t N,
                               int64_t C, Profile* prof = nullptr);

// Under SP a replicated parameter used in the sequence region (LayerNorm
// gains and shifts) gets only this rank's rows' share of its gradient: sum
// the shares of one micro-batch over tp (grad (n), in place).
void tp_sum_region_grad(const TensorParallel& tp, float* grad, int64_t n,
                        Profile* prof = nullptr);

// x (n) reduced over the tp group in place (the vocab-parallel loss
// statistics: the row max, then the sum-exp and target logit). A no-op
// without tensor parallelism.
void tp_all_reduce(const TensorParallel& tp, float* x, int64_t n, comm::ReduceOp op,
                   Profile* prof = nullptr);

// Elements each rank moves per micro-batch in the tensor-parallel group, per
// collective, in the data-size convention of comm_op.h (all_reduce: the
// buffer; reduce_scatter: the full input; all_gather: the full output).
// `layers` transformer layers on this rank (-1: all), `embedding` / `head`
// whether it holds the first / last pipeline stage. Zero for tp = 1.
//   no SP, per layer: 4 all-reduces of B*T*C (2 forward after attn proj and
//     mlp proj, 2 backward before qkv and fc);
//     embedding: 1 all-reduce of B*T*C (forward);
//     head: 1 all-reduce of B*T*C (backward of the LM head's input) and the
//     loss statistics, all-reduce of B*T (max) and 2*B*T (sum-exp, target logit).
//   SP, per layer: forward 2 all-gathers + 2 reduce-scatters of B*T*C;
//     backward 4 all-gathers (2 of dY, 2 re-gathers of the LayerNorm
//     outputs, which are kept sharded) + 2 reduce-scatters of B*T*C, and
//     one all-reduce of 4*C (the LayerNorm gradients);
//     embedding: reduce-scatter forward, all-gather backward, B*T*C each;
//     head: all-gather forward, all-gather (re-gather) + reduce-scatter
//     backward, B*T*C each; all-reduce of 2*C (ln_f gradients) and the loss
//     statistics as above.
struct TpCommElements {
  int64_t all_reduce = 0, reduce_scatter = 0, all_gather = 0;
  int64_t total() const { return all_reduce + reduce_scatter + all_gather; }
};
TpCommElements tp_comm_elements_per_microbatch(const GPTConfig& config, int64_t B, int64_t T,
                                               int64_t tp, bool sp, int64_t layers = -1,
                                               bool embedding = true, bool head = true);

}  // namespace tessera
