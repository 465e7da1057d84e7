// Context parallelism as the model sees it (docs/context_parallel.md): the
// cp group, the rows of each sequence this rank holds, and the attention
// ring that lets those rows see the whole sequence.
//
// A rank holds T/cp rows of every sequence, load-balanced for the causal
// mask (kernels/context_chunks.h: chunks r and 2cp-1-r). Everything but
// attention is row-wise, so the rest of the block runs on the local rows
// unchanged, with global positions wherever a position matters: RoPE and
// the causal mask inside the ring, the learned position embedding, and the
// dropout masks (cp_dropout_rows: element (sample, global token, column),
// so the masks equal one process's).
//
// Attention (--cp-comm-type):
//   p2p         the ring. Forward: cp steps; each starts sending the K/V
//               block in hand to rank +1 and receiving the next from rank -1,
//               then merges the block in hand (online softmax), so the
//               transfer hides behind the block's attention. Backward: the
//               same ring, each block's dK/dV accumulator travelling one
//               step behind it, with one last hop back to its owner.
//   all_gather  Llama 3's form: all-gather every rank's K/V, merge the cp
//               blocks; backward reduce-scatters the blocks' dK/dV.
// The kernels are fp32 (backend_methods.inc, ring_*): under --bf16 /
// --fp16 qkv and the output are widened and rounded at this seam.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/comm/communicator.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/context_chunks.h"
#include "tessera/kernels/dropout_site.h"
#include "tessera/kernels/ops.h"

namespace tessera {

class ContextParallel {
 public:
  ContextParallel() = default;  // inactive: the whole sequence here
  // group: Grid::cp() (null or size 1: inactive); T: the whole sequence's
  // tokens; all_gather: --cp-comm-type all_gather.
  ContextParallel(comm::Communicator* group, int64_t T, bool all_gather);

  bool active() const { return group_ != nullptr && group_->size() > 1; }
  int64_t size() const { return active() ? group_->size() : 1; }
  int64_t rank() const { return active() ? group_->rank() : 0; }
  int64_t seq_length() const { return T_; }   // whole sequence
  int64_t local_T() const { return T_ / size(); }  // rows of each sequence held here
  bool all_gather() const { return all_gather_; }
  ContextChunks chunks() const { return {T_, size(), rank()}; }
  // (local_T) global positions of this rank's rows.
  const std::vector<int64_t>& positions() const { return pos_[size_t(rank())]; }

  // Causal attention of this rank's rows against the whole sequence: out
  // (B, Tl, NH HS), lse (B, NH, Tl) from qkv (B, Tl, qkv_width), Tl =
  // local_T(); out and qkv of one type. Collective over the cp group.
  void attention_forward(const kernels::Ops& ops, kernels::Act out, float* lse,
                         kernels::ConstAct qkv, int64_t B, const AttentionHeads& heads,
                         const DropoutSite* drop) const;
  // dqkv (B, Tl, qkv_width) written, of qkv's type; dout (B, Tl, NH HS)
  // fp32; out and lse the forward's. Collective over the cp group.
  void attention_backward(const kernels::Ops& ops, kernels::Act dqkv, const float* dout,
                          kernels::ConstAct qkv, kernels::ConstAct out, const float* lse,
                          int64_t B, const AttentionHeads& heads, const DropoutSite* drop) const;

  // Allocates the scratch below at the sizes the calls of B sequences with
  // these heads use (lowp: 16-bit qkv and out, widened here), so the run
  // holds it from the start, as it would from its first layer on, and
  // scratch_bytes() can report it before the first step. The calls size it
  // with the same function (size_scratch): nothing moves. Inactive: nothing.
  void reserve(int64_t B, const AttentionHeads& heads, bool lowp) const;
  // Bytes of the scratch allocated now (the metrics header's activation
  // memory adds them to the arena's: train/trainer.cpp memory_by_rank).
  int64_t scratch_bytes() const;

 private:
  // Sizes every scratch buffer below for B sequences with these heads
  // (lowp: also the widened copies); reserve() and the calls both use it.
  void size_scratch(int64_t B, const AttentionHeads& heads, bool lowp) const;
  // Widened copies of 16-bit operands (fp32: the caller's own buffers);
  // buf is sized by size_scratch.
  const float* wide(const kernels::Ops& ops, std::vector<float>& buf, kernels::ConstAct x,
                    int64_t n) const;

  comm::Communicator* group_ = nullptr;
  int64_t T_ = 1;
  bool all_gather_ = false;
  std::vector<std::vector<int64_t>> pos_ = std::vector<std::vector<int64_t>>(1);  // (cp, Tl)

  // Scratch reused by every layer's call (one call at a time: the layers
  // run in turn). A few (B, Tl, width) buffers: the ring's in-flight K/V
  // blocks and their gradients, or the gathered K/V under all_gather.
  mutable std::vector<float> kv_[2], dkv_[3];   // (B, Tl, 2 KVH HS) each; all_gather: (cp, ...)
  mutable std::vector<float> q32_, out32_, dq_, D_;  // widened qkv, out; dq, D
};

// The functions below walk a rank's rows run by run (kernels/context_chunks.h
// chunk_runs): rows [row0, row0 + rows) of the flattened (B, Tl) local rows,
// all of them or, under sequence parallelism, this tp rank's block of them
// (row0 = tp rank x rows). Without cp the runs are whole sequences of Tl = T
// rows in order.

// Hidden dropout (kernels/cpu/dropout.h) of x (rows, C), local rows [row0,
// row0 + rows) of sequences of Tl rows, keyed by their global rows, so each
// mask equals one process's. Without cp: one dropout_rows call from row0.
void cp_dropout_rows(const kernels::Ops& ops, const ContextParallel& cp, float* x, int64_t rows,
                     int64_t C, int64_t row0, int64_t Tl, const DropoutSite& site);

// The learned position embedding of local rows [row0, row0 + rows) of
// sequences of Tl rows: out (rows, C) += wpe at each row's global position;
// backward dwpe (T, C) += dout's (B * Tl, C) rows at their positions (all
// of them: the embedding's backward gathers them under SP).
void cp_position_embedding_forward(const kernels::Ops& ops, const ContextParallel& cp,
                                   float* out, const float* wpe, int64_t row0, int64_t rows,
                                   int64_t Tl, int64_t C);
void cp_position_embedding_backward(const kernels::Ops& ops, const ContextParallel& cp,
                                    float* dwpe, const float* dout, int64_t B, int64_t Tl,
                                    int64_t C);

}  // namespace tessera
