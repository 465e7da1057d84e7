// What context parallelism (--context-parallel-size cp; docs/context_parallel.md)
// changes in a plan. Each rank of a cp group holds T / cp tokens of every
// sequence (chunks i and 2 cp - 1 - i of 2 cp, load-balanced for causal
// attention), so everything token-wise (GEMMs, norms, the MLP, the head,
// stored activations) is the op list of a T / cp sequence; attention is not:
// each rank's queries meet the keys of the whole (causal) sequence, 1 / cp of
// all the causal pairs, cp times what a lone T / cp sequence computes. The
// keys and values reach it by a ring (p2p: cp - 1 steps, each overlapped
// with the attention on the block in hand) or all at once (all_gather:
// Llama 3's variant, exposed). Gradients and ZeRO state reduce and shard over
// dp x cp (comm/grid_layout.h's dp_cp_group). cp = 1 changes nothing.
#pragma once
#include <cstdint>

#include "tessera/config/gpt_config.h"
#include "tessera/core/profile.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// The model as one cp rank sees it: seq_length T / cp (its two chunks), the
// position table still the whole sequence's (positions are global). cp 1:
// the model itself.
GPTConfig cp_local_model(const GPTConfig& m, int64_t cp);

// The ranks that reduce gradients and shard ZeRO state together: dp x cp.
int64_t dp_cp(const ParallelConfig& par);

// Bytes of one K and V block of a rank's T / cp rows on one tp rank
// (kv heads split over tp; GQA's fewer heads): what one ring step moves.
double cp_kv_block_bytes(const GPTConfig& m, const PlanLayout& L);

// The exchange's buffers at the attention of one layer (transient, one layer
// at a time): p2p keeps the block in hand and the one arriving, in backward
// also the dK / dV travelling with them (4 blocks); all_gather holds the
// whole sequence's K / V and, in backward, its dK / dV (2 cp blocks). The
// engine (fp32 or L.engine): its own fp32 scratch (model/context_parallel.h).
double cp_buffer_bytes(const GPTConfig& m, const PlanLayout& L);

// One layer's exchange for one micro-batch on one rank, in seconds.
struct CpLayerComm {
  double forward = 0, backward = 0;  // the traffic (whether hidden or not)
  // What waits beyond the attention beside it (forward, backward, and the
  // recompute's forward again when the layer recomputes its attention).
  double forward_exposed = 0, backward_exposed = 0, recompute_exposed = 0;
};

// attention_forward / _backward: the layer's attention seconds on this rank
// (already cp x the T / cp op list's: scale_cp_attention), which the ring's
// steps hide behind, one cp-th of it per step. comm_overlap: the system's
// (layout_cost.cpp ChunkWork::overlapped).
CpLayerComm cp_layer_comm(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                          double attention_forward, double attention_backward);

// Attention of the T / cp op list scaled to what a cp rank computes (x cp).
void scale_cp_attention(Profile& p, int64_t cp);

}  // namespace tessera::plan
