#include "tessera/plan/context_parallel_cost.h"

#include <algorithm>

#include "tessera/plan/comm_model.h"

namespace tessera::plan {

GPTConfig cp_local_model(const GPTConfig& m, int64_t cp) {
  if (cp <= 1) return m;
  GPTConfig local = m;
  // The learned position table (GPT-2) is the whole sequence's on every
  // rank: the parameters do not change with cp.
  local.max_position_embeddings = m.positions();
  local.seq_length = m.seq_length / cp;  // ParallelConfig::validate: T % (2 cp) == 0
  return local;
}

int64_t dp_cp(const ParallelConfig& par) { return par.dp * par.cp; }

double cp_kv_block_bytes(const GPTConfig& m, const PlanLayout& L) {
  const auto& par = L.par;
  // K and V of this rank's T / cp rows: (b, T / cp, kv_heads / tp, head_size) each.
  const double rows = double(par.micro_batch) * double(m.seq_length / par.cp);
  const double kv_width = double(m.kv_heads() * m.head_size()) / double(par.tp);
  return 2.0 * rows * kv_width * double(activation_element_bytes(L.precision));
}

double cp_buffer_bytes(const GPTConfig& m, const PlanLayout& L) {
  const auto& par = L.par;
  if (par.cp <= 1) return 0;
  const double cp = double(par.cp);
  const double block = cp_kv_block_bytes(m, L);
  if (L.engine || L.precision == Precision::Fp32) {
    // The engine's scratch (model/context_parallel.h), fp32 whatever the
    // precision: p2p keeps two K/V blocks and three dK/dV ones; all_gather
    // the gathered K/V and every block's dK/dV (cp + 1 each); both the
    // backward's dq (B, T / cp, NH HS) and D (B, NH, T / cp); under bf16 /
    // fp16 the widened qkv (B, T / cp, (NH + 2 KVH) HS) and out (B, T / cp,
    // NH HS). The trainer allocates all of it up front and its metrics
    // header counts it with the arena (ContextParallel::reserve).
    const double fp32_block = block * 4.0 / double(activation_element_bytes(L.precision));
    const double rows = double(par.micro_batch) * double(m.seq_length / par.cp);
    const double dq_d = 4.0 * rows * double(m.num_heads / par.tp) * double(m.head_size() + 1);
    const double widened =
        L.precision == Precision::Fp32
            ? 0.0
            : 4.0 * rows * double((2 * m.num_heads + 2 * m.kv_heads()) / par.tp) *
                  double(m.head_size());
    const double blocks = par.cp_comm == CpCommType::AllGather ? 2.0 * (cp + 1.0) : 5.0;
    return blocks * fp32_block + dq_d + widened;
  }
  // Megatron-Core / Transformer Engine: the block in hand and the one
  // arriving, and in backward their dK/dV beside them; all_gather the whole
  // sequence's K/V and its dK/dV.
  if (par.cp_comm == CpCommType::AllGather) return 2.0 * cp * block;
  return 4.0 * block;
}

namespace {

// The seconds a collective of `comm` seconds waits beyond `compute` seconds
// beside it, as layout_cost.cpp's ChunkWork::overlapped: comm_overlap of it
// hides behind compute twice its length, and what exceeds the compute shows.
double overlapped(double comm, double compute, double comm_overlap) {
  return std::max((1.0 - comm_overlap) * comm, comm - compute);
}

}  // namespace

CpLayerComm cp_layer_comm(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                          double attention_forward, double attention_backward) {
  CpLayerComm c;
  const auto& par = L.par;
  const int64_t cp = par.cp;
  if (cp <= 1) return c;
  const double block = cp_kv_block_bytes(m, L);
  // The cp ranks are tp apart (Megatron's order: tp, cp, dp, pp): the ring
  // runs on the slowest tier any cp group spans (all within a node when
  // tp x cp fits one, else its node-crossing hops set the pace).
  const NetworkTier& tier = group_tier(sys, CommOp::AllGather, cp, par.tp, L.devices());
  if (par.cp_comm == CpCommType::AllGather) {
    // Llama 3's variant: the whole sequence's K / V gathered before the
    // attention (and again in backward), dK / dV reduce-scattered after it;
    // nothing computes beside them.
    const double gather =
        collective_cost(sys, CommOp::AllGather, double(cp) * block, cp, par.tp, L.devices()).seconds;
    const double scatter =
        collective_cost(sys, CommOp::ReduceScatter, double(cp) * block, cp, par.tp, L.devices()).seconds;
    c.forward = c.forward_exposed = gather;
    c.backward = c.backward_exposed = gather + scatter;
    c.recompute_exposed = par.recompute != Recompute::None ? gather : 0.0;
    return c;
  }
  // p2p: each of cp - 1 steps sends the block in hand to the next rank while
  // attending to it; every rank sends at once, so a step is one message on
  // the tier. Backward passes K / V and their accumulating dK / dV (two
  // blocks a step), and the dK / dV of the last step go one hop home after
  // the last block's attention, with nothing left to hide behind.
  const RingTerms one = ring_terms(CommOp::Send, block, 2, tier);
  const RingTerms two = ring_terms(CommOp::Send, 2.0 * block, 2, tier);
  const double step_fwd = one.latency + one.bandwidth, step_bwd = two.latency + two.bandwidth;
  const double steps = double(cp - 1);
  const double co = sys.comm_overlap;
  c.forward = steps * step_fwd;
  c.backward = steps * step_bwd + step_fwd;
  c.forward_exposed = steps * overlapped(step_fwd, attention_forward / double(cp), co);
  c.backward_exposed = steps * overlapped(step_bwd, attention_backward / double(cp), co) + step_fwd;
  // Selective recompute re-runs the attention core, full recompute the
  // whole layer: either runs the ring again.
  c.recompute_exposed = par.recompute != Recompute::None ? c.forward_exposed : 0.0;
  return c;
}

void scale_cp_attention(Profile& p, int64_t cp) {
  if (cp > 1) p[Op::Attention] *= double(cp);
}

}  // namespace tessera::plan
