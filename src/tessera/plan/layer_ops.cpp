#include "tessera/plan/layer_ops.h"

#include <algorithm>

#include "tessera/model/flops.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/kernel_cost.h"

namespace tessera::plan {

// Flash attention's backward recomputes the scores: 5 matmuls against the
// forward's 2 (Dao et al. 2022), at similar efficiency.
constexpr double kFlashBackwardRatio = 2.5;

LayerOps layer_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const Precision prec = L.precision;
  const int64_t t = par.tp, rows = par.micro_batch * m.seq_length;
  const int64_t h = m.hidden_size, f = m.ffn(), s = m.seq_length;
  // Rows this rank holds outside the tensor-parallel regions (Ns): all of
  // them, or 1/t with sequence parallelism.
  const double ns = par.sequence_parallel ? double(rows) / double(t) : double(rows);
  const double elt = double(activation_element_bytes(prec));
  auto kernel = [&](Kernel k, double elements) { return kernel_seconds(sys, k, elements, elt); };
  LayerOps r;
  Profile& fw = r.forward;
  Profile& bw = r.backward;
  // The four linears of a Megatron layer on one tp rank: QKV and MLP-up are
  // column-parallel (output split), attention-out and MLP-down row-parallel.
  const GemmShape linears[] = {{rows, 3 * h / t, h}, {rows, h, h / t}, {rows, f / t, h},
                               {rows, h, f / t}};
  for (const auto& g : linears) {
    fw[Op::Gemm] += gemm_seconds(sys, prec, g);
    // Backward: input gradient dY W^T (rows x k x n) and weight gradient X^T dY (k x n x rows).
    bw[Op::Gemm] += gemm_seconds(sys, prec, {g.m, g.k, g.n}) + gemm_seconds(sys, prec, {g.k, g.n, g.m});
    // Every linear has a bias; its gradient is a column sum of dY (matmul.cpp).
    bw[Op::Gemm] += kernel(Kernel::BiasGrad, double(g.m) * double(g.n));
  }
  // Column-parallel biases are added inside the GEMM call; row-parallel ones
  // too without tp, after the sum (to Ns rows, block.cpp) with it.
  fw[Op::Gemm] += kernel(Kernel::BiasAdd, double(rows) * double(3 * h / t + f / t));
  if (t == 1)
    fw[Op::Gemm] += kernel(Kernel::BiasAdd, 2.0 * double(rows) * double(h));
  else
    fw[Op::Residual] += kernel(Kernel::BiasAdd, 2.0 * ns * double(h));
  fw[Op::Residual] += 2 * kernel(Kernel::Residual, ns * double(h));
  fw[Op::LayerNorm] += 2 * kernel(Kernel::LayerNormForward, ns * double(h));
  bw[Op::LayerNorm] += 2 * kernel(Kernel::LayerNormBackward, ns * double(h));
  fw[Op::Gelu] += kernel(Kernel::GeluForward, double(rows) * double(f / t));
  bw[Op::Gelu] += kernel(Kernel::GeluBackward, double(rows) * double(f / t));

  // Attention core: Q K^T and P V over the (s x s) scores of a/t heads.
  const int64_t heads = m.num_heads / t, hd = m.head_size();
  if (L.flash_attention) {
    const double flops = 4.0 * double(par.micro_batch) * double(s) * double(s) * double(h / t);
    fw[Op::Attention] =
        flops / (peak_flops(sys, prec) * sys.gemm_max_efficiency * sys.attention_efficiency);
    bw[Op::Attention] = kFlashBackwardRatio * fw[Op::Attention];
  } else {
    const int64_t batch = par.micro_batch * heads;
    const double softmax = 3.0 * elt * double(batch) * double(s) * double(s) / sys.memory_bandwidth;
    const double gemms =
        gemm_seconds(sys, prec, {s, s, hd, batch}) + gemm_seconds(sys, prec, {s, hd, s, batch});
    fw[Op::Attention] = gemms + softmax;
    bw[Op::Attention] = 2 * gemms + 2 * softmax;
  }

  // Megatron TP: the attention and MLP regions each enter (f: identity
  // forward, all-reduce backward) and leave (g: all-reduce forward, identity
  // backward), Shoeybi et al. 2019. With SP enter all-gathers the LayerNorm
  // output and leave reduce-scatters (Korthikanti §4.2.2); backward gathers
  // dY for each region, re-gathers each LayerNorm output (only the shard is
  // kept) and reduce-scatters each input gradient (block.cpp).
  if (t > 1) {
    const double bytes = elt * double(rows) * double(h);
    auto cost = [&](Collective c) { return collective_cost(sys, c, bytes, t, 1, L.devices()).seconds; };
    if (par.sequence_parallel) {
      fw[Op::Comm] = 2 * (cost(Collective::AllGather) + cost(Collective::ReduceScatter));
      bw[Op::Comm] = 4 * cost(Collective::AllGather) + 2 * cost(Collective::ReduceScatter);
    } else {
      fw[Op::Comm] = 2 * cost(Collective::AllReduce);
      bw[Op::Comm] = 2 * cost(Collective::AllReduce);
    }
  }
  if (par.recompute == Recompute::Full) r.recompute = r.forward;
  if (par.recompute == Recompute::Selective) {
    r.recompute[Op::Attention] = fw[Op::Attention];
    r.recompute[Op::Gelu] = fw[Op::Gelu];
  }
  return r;
}

EndOps end_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const Precision prec = L.precision;
  const int64_t t = par.tp, rows = par.micro_batch * m.seq_length, h = m.hidden_size;
  const int64_t v = m.padded_vocab(t) / t;
  const double ns = par.sequence_parallel ? double(rows) / double(t) : double(rows);
  const double elt = double(activation_element_bytes(prec));
  auto kernel = [&](Kernel k, double elements) { return kernel_seconds(sys, k, elements, elt); };
  EndOps e;
  e.embed_forward[Op::Embedding] = kernel(Kernel::EmbeddingForward, double(rows) * double(h));
  e.embed_backward[Op::Embedding] = kernel(Kernel::EmbeddingBackward, double(rows) * double(h));
  e.head_forward[Op::LayerNorm] = kernel(Kernel::LayerNormForward, ns * double(h));
  e.head_backward[Op::LayerNorm] = kernel(Kernel::LayerNormBackward, ns * double(h));
  e.head_forward[Op::Gemm] = gemm_seconds(sys, prec, {rows, v, h});
  e.head_backward[Op::Gemm] =
      gemm_seconds(sys, prec, {rows, h, v}) + gemm_seconds(sys, prec, {h, v, rows});
  e.head_forward[Op::Loss] = kernel(Kernel::CrossEntropyForward, double(rows) * double(v));
  e.head_backward[Op::Loss] = kernel(Kernel::CrossEntropyBackward, double(rows) * double(v));
  if (t > 1) {
    const double bytes = elt * double(rows) * double(h);
    auto cost = [&](Collective c, double b) { return collective_cost(sys, c, b, t, 1, L.devices()).seconds; };
    // Vocab-parallel cross-entropy all-reduces a max and then two sums per token.
    e.head_forward[Op::Comm] = cost(Collective::AllReduce, 4.0 * double(rows)) +
                               cost(Collective::AllReduce, 8.0 * double(rows));
    if (par.sequence_parallel) {
      // The vocab-parallel lookup's partial rows are reduce-scattered; the
      // final LayerNorm's output gathered forward and again backward; its
      // input gradient reduce-scattered; the embedding gradient gathered.
      e.embed_forward[Op::Comm] = cost(Collective::ReduceScatter, bytes);
      e.embed_backward[Op::Comm] = cost(Collective::AllGather, bytes);
      e.head_forward[Op::Comm] += cost(Collective::AllGather, bytes);
      e.head_backward[Op::Comm] =
          cost(Collective::AllGather, bytes) + cost(Collective::ReduceScatter, bytes);
    } else {
      e.embed_forward[Op::Comm] = cost(Collective::AllReduce, bytes);
      e.head_backward[Op::Comm] = cost(Collective::AllReduce, bytes);
    }
  }
  return e;
}

// Blocking synchronisations of one step on the busiest rank (the last
// stage): every collective or receive at which a rank waits for the others
// (the engine's call sites in block.cpp, gpt.cpp, data_parallel.cpp and the
// pipeline executor). Each costs the system's sync_wait: noise makes some
// rank late at every one, however little data it carries.
double syncs_per_step(const PlanLayout& L, int64_t layers_per_chunk) {
  const auto& par = L.par;
  const bool sp = par.sequence_parallel;
  const double mb_chunks = double(L.micro_batches() * par.virtual_stages);
  double n = 0;
  if (par.tp > 1) {
    // Per layer: 2 all-reduces each way; with SP 2 gathers + 2 scatters
    // forward, 4 gathers + 2 scatters + the LayerNorm gradients' sum back.
    double layer = sp ? 4 + 7 : 2 + 2;
    if (par.recompute == Recompute::Full) layer += sp ? 4 : 2;
    // The head: the loss's max and sums, the input gradient (SP: the
    // gathers of the final LayerNorm's output and its gradients' sum).
    double ends = sp ? 2 + 1 + 1 + 1 + 1 : 2 + 1;
    // Without a pipeline the same rank embeds: the vocab-parallel lookup's
    // sum (SP: its reduce-scatter, and the gather before its backward).
    if (par.pp == 1) ends += sp ? 2 : 1;
    n += mb_chunks * double(layers_per_chunk) * layer + double(L.micro_batches()) * ends + 1;
  }
  if (par.dp > 1) {
    n += 2;  // the gradient reduction's wait, the loss's all-reduce
    if (par.zero_stage >= 1) n += 1;  // the gradient norm over shards
    if (par.zero_stage == 1 || par.zero_stage == 2) n += 1;  // the weights' all-gather
    if (par.zero_stage == 3) n += mb_chunks * double(layers_per_chunk) * 2;  // gathers per use
  }
  if (par.pp > 1) n += 2 * mb_chunks + 3;  // receives; loss broadcast, embedding sum, norm
  return n;
}

}  // namespace tessera::plan
