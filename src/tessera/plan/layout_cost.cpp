#include "tessera/plan/layout_cost.h"

#include <algorithm>
#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/model/flops.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/pipeline_time.h"

namespace tessera::plan {

namespace {

// Element-wise passes over the (b s h) residual stream per layer forward:
// two LayerNorms (read + write), two residual adds (2 reads + 1 write), two
// dropouts (read, write, mask), rounded: 15. GELU reads and writes the
// (b s f) MLP activation. Backward moves about twice as much.
constexpr double kResidualPasses = 15.0;
constexpr double kMlpPasses = 2.0;
// Flash attention's backward recomputes the scores: 5 matmuls against the
// forward's 2 (Dao et al. 2022), at similar efficiency.
constexpr double kFlashBackwardRatio = 2.5;
// Optimizer bytes moved per local parameter: read/write fp32 master, m and v
// (24), read the gradient, write the low-precision weight (4) — about 28
// either precision.
constexpr double kOptimizerBytesPerParam = 28.0;

// Seconds of one transformer layer on one tp rank for one micro-batch.
struct LayerTimes {
  double forward = 0, backward = 0;  // compute (GEMMs, attention, element-wise)
  double recompute = 0;              // extra compute in backward from recomputation
  double tp_forward = 0, tp_backward = 0;  // tensor-parallel collectives
  double attention_forward = 0;
};

LayerTimes layer_times(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const Precision prec = L.precision;
  const int64_t t = par.tp, rows = par.micro_batch * m.seq_length;
  const int64_t h = m.hidden_size, f = m.ffn(), s = m.seq_length;
  const double elt = double(activation_element_bytes(prec));
  LayerTimes r;
  // The four linears of a Megatron layer on one tp rank: QKV and MLP-up are
  // column-parallel (output split), attention-out and MLP-down row-parallel.
  const GemmShape linears[] = {{rows, 3 * h / t, h}, {rows, h, h / t}, {rows, f / t, h},
                               {rows, h, f / t}};
  for (const auto& g : linears) {
    r.forward += gemm_seconds(sys, prec, g);
    // Backward: input gradient dY W^T (rows x k x n) and weight gradient X^T dY (k x n x rows).
    r.backward += gemm_seconds(sys, prec, {g.m, g.k, g.n}) + gemm_seconds(sys, prec, {g.k, g.n, g.m});
  }
  // Attention core: Q K^T and P V over the (s x s) scores of a/t heads.
  const int64_t heads = m.num_heads / t, hd = m.head_size();
  double attn_f = 0, attn_b = 0;
  if (L.flash_attention) {
    const double flops = 4.0 * double(par.micro_batch) * double(s) * double(s) * double(h / t);
    attn_f = flops / (peak_flops(sys, prec) * sys.gemm_max_efficiency * sys.attention_efficiency);
    attn_b = kFlashBackwardRatio * attn_f;
  } else {
    const int64_t batch = par.micro_batch * heads;
    const double softmax = 3.0 * elt * double(batch) * double(s) * double(s) / sys.memory_bandwidth;
    attn_f = gemm_seconds(sys, prec, {s, s, hd, batch}) + gemm_seconds(sys, prec, {s, hd, s, batch}) +
             softmax;
    attn_b = 2 * (gemm_seconds(sys, prec, {s, s, hd, batch}) +
                  gemm_seconds(sys, prec, {s, hd, s, batch})) +
             2 * softmax;
  }
  r.attention_forward = attn_f;
  const double replicated = par.sequence_parallel ? double(t) : 1.0;
  const double elementwise = elt * double(rows) *
                             (kResidualPasses * double(h) / replicated + kMlpPasses * double(f / t)) /
                             sys.memory_bandwidth;
  r.forward += attn_f + elementwise;
  r.backward += attn_b + 2 * elementwise;
  if (par.recompute == Recompute::Full) r.recompute = r.forward;
  if (par.recompute == Recompute::Selective) r.recompute = attn_f;

  // Megatron TP: two all-reduces of the (b s h) activations forward and two
  // backward (f and g of Shoeybi et al. 2019); with SP each becomes an
  // all-gather + reduce-scatter pair of the same volume (Korthikanti §4.2.2).
  if (t > 1) {
    const double bytes = elt * double(rows) * double(h);
    double one;
    if (par.sequence_parallel)
      one = collective_cost(sys, Collective::AllGather, bytes, t, 1).seconds +
            collective_cost(sys, Collective::ReduceScatter, bytes, t, 1).seconds;
    else
      one = collective_cost(sys, Collective::AllReduce, bytes, t, 1).seconds;
    r.tp_forward = 2 * one;
    r.tp_backward = 2 * one + (par.recompute == Recompute::Full ? 2 * one : 0.0);
  }
  return r;
}

// The LM head (logits over the tp-local vocabulary slice and the loss) for
// one micro-batch, forward and backward, and the embedding lookup.
struct EndTimes {
  double head_forward = 0, head_backward = 0, embed_forward = 0, embed_backward = 0;
  double tp_forward = 0, tp_backward = 0;  // embedding all-reduce, loss statistics
};

EndTimes end_times(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const Precision prec = L.precision;
  const int64_t t = par.tp, rows = par.micro_batch * m.seq_length, h = m.hidden_size;
  const int64_t v = m.padded_vocab(t) / t;
  const double elt = double(activation_element_bytes(prec));
  EndTimes e;
  // Cross-entropy in fp32 over the logits: read, exp-sum, write the gradient.
  const double loss = 3.0 * 4.0 * double(rows) * double(v) / sys.memory_bandwidth;
  e.head_forward = gemm_seconds(sys, prec, {rows, v, h}) + loss;
  e.head_backward = gemm_seconds(sys, prec, {rows, h, v}) + gemm_seconds(sys, prec, {h, v, rows}) + loss;
  e.embed_forward = 2.0 * elt * double(rows) * double(h) / sys.memory_bandwidth;
  e.embed_backward = e.embed_forward;
  if (t > 1) {
    // Vocab-parallel embedding sums its partial lookups; vocab-parallel
    // cross-entropy all-reduces a max and a sum per token.
    e.tp_forward = collective_cost(sys, Collective::AllReduce, elt * double(rows) * double(h), t, 1).seconds +
                   2 * collective_cost(sys, Collective::AllReduce, 4.0 * double(rows), t, 1).seconds;
    e.tp_backward = 0;
  }
  return e;
}

std::string gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

}  // namespace

StageActivations stage_activations(const GPTConfig& m, const PlanLayout& L, int64_t stage) {
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages;
  const int64_t layers_per_chunk = m.num_layers / (p * v);
  StageActivations a;
  a.in_flight = in_flight_chunks(L.schedule, p, v, L.micro_batches(), stage);
  const double held_layers = double(a.in_flight * layers_per_chunk);
  const bool has_head = stage == p - 1;
  if (L.precision == Precision::FP32) {
    // The engine's fp32 arena, built from the same ActShape the engine
    // builds (GPT::stage_act_shape: recompute, sequence parallelism, this
    // stage's layers per chunk and head): the executor allocates one full
    // arena per in-flight slot (peak_in_flight of the schedule; one without
    // a pipeline), and the metrics header reports exactly their bytes.
    const ActShape shape = engine_shape(m, par.micro_batch, par.tp, layers_per_chunk, has_head,
                                        par.sequence_parallel, par.recompute);
    ActShape one = shape;
    one.L = 1, one.has_head = false;
    ActShape two = one;
    two.L = 2;
    const double per_layer = double(activations_bytes(two) - activations_bytes(one));
    a.layers = held_layers * per_layer;
    a.total = double(a.in_flight) * double(activations_bytes(shape));
    return a;
  }
  a.layers = held_layers * korthikanti_layer_bytes(m, par.micro_batch, par.tp, par.sequence_parallel,
                                                   par.recompute, L.flash_attention);
  a.total = a.layers;
  // Recomputing a layer in backward materialises its full activations once.
  if (par.recompute != Recompute::None)
    a.total += korthikanti_layer_bytes(m, par.micro_batch, par.tp, par.sequence_parallel,
                                       Recompute::None, L.flash_attention);
  const double sbh = double(m.seq_length * par.micro_batch * m.hidden_size);
  // First stage: the embedding dropout's 1-byte mask of each in-flight
  // micro-batch, Korthikanti §4.3: sbh, /t with SP. (The embedding output
  // itself is the first layer's input, already counted.)
  if (stage == 0)
    a.total += double(a.in_flight) * sbh / (par.sequence_parallel ? double(par.tp) : 1.0);
  // Last stage: the fp32 logits and their gradient for the micro-batch in
  // backward: 2 * 4 s b V / t.
  if (has_head)
    a.total += 8.0 * double(m.seq_length * par.micro_batch) * double(m.padded_vocab(par.tp) / par.tp);
  return a;
}

LayoutCost evaluate_layout(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                           ParamCounter& params, const CostOptions& opt) {
  const auto& par = L.par;
  par.validate(m, L.devices());
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp, dp = par.dp;
  const int64_t mb = L.micro_batches();
  schedule_validate(L.schedule, p, v, mb);

  LayoutCost c;
  c.layout = L;
  const StateBytesPerParam per_param = state_bytes_per_param(L.precision);
  const int64_t layers_per_chunk = m.num_layers / (p * v);
  const double chunk_params = double(params.layer_params(t) * layers_per_chunk);

  // ---- memory per stage -------------------------------------------------
  std::vector<int64_t> which;
  if (opt.all_stages || p <= 2) {
    for (int64_t s = 0; s < p; ++s) which.push_back(s);
  } else {
    which = {0, p - 1};
  }
  for (int64_t s : which) {
    StageCost sc;
    sc.stage = s;
    sc.params = params.stage_params(par, s);
    sc.state = zero_state_bytes(double(sc.params), L.precision, par.zero_stage, dp);
    StageActivations a = stage_activations(m, L, s);
    sc.activations = a.total;
    sc.layer_activations = a.layers;
    sc.in_flight = a.in_flight;
    // ZeRO-3 gathers a chunk's weights before using it, and prefetches the
    // next. fp32 (the engine): the gathered layer is a transient buffer that
    // the trainer's memory header (params + grads + optimizer + activations)
    // does not count, so neither does the prediction.
    if (par.zero_stage == 3 && dp > 1 && L.precision != Precision::FP32) sc.zero3_buffers = 2.0 * chunk_params * per_param.weights;
    c.stages.push_back(sc);
    if (sc.memory() > c.peak_memory) c.peak_memory = sc.memory(), c.peak_stage = s;
  }
  if (c.peak_memory > sys.usable_memory()) {
    const StageCost& w = *std::find_if(c.stages.begin(), c.stages.end(),
                                       [&](const StageCost& s) { return s.stage == c.peak_stage; });
    c.fits = false;
    c.why_not = fmt::format(
        "stage {} needs {} > {} usable (weights {}, grads {}, optimizer {}, activations {}{})",
        w.stage, gb(w.memory()), gb(sys.usable_memory()), gb(w.state.weights), gb(w.state.grads),
        gb(w.state.optimizer), gb(w.activations),
        w.zero3_buffers > 0 ? ", zero-3 buffers " + gb(w.zero3_buffers) : "");
  }

  // ---- time -------------------------------------------------------------
  const LayerTimes lt = layer_times(m, sys, L);
  const EndTimes et = end_times(m, sys, L);
  const double lc = double(layers_per_chunk);
  double zero3_chunk = 0;  // per micro-batch per chunk: gather forward and again backward
  if (par.zero_stage == 3 && dp > 1)
    zero3_chunk = collective_cost(sys, Collective::AllGather, chunk_params * per_param.weights * double(dp),
                                  dp, t).seconds;
  PipelineCosts pc;
  pc.kind = L.schedule;
  pc.p = p;
  pc.v = v;
  pc.m = mb;
  const int64_t chunks = p * v;
  pc.forward.assign(size_t(chunks), lc * (lt.forward + lt.tp_forward) + zero3_chunk);
  pc.backward.assign(size_t(chunks),
                     lc * (lt.backward + lt.recompute + lt.tp_backward) + zero3_chunk);
  pc.forward.front() += et.embed_forward + et.tp_forward;
  pc.backward.front() += et.embed_backward;
  pc.forward.back() += et.head_forward;
  pc.backward.back() += et.head_backward + et.tp_backward;
  const double elt = double(activation_element_bytes(L.precision));
  // Megatron's scatter/gather optimisation: each tp rank sends 1/t of the
  // (b s h) activation, the receiver all-gathers it over the fast link.
  const double p2p_bytes = elt * double(par.micro_batch * m.seq_length * m.hidden_size) / double(t);
  if (p > 1) pc.p2p_seconds = collective_cost(sys, Collective::SendRecv, p2p_bytes, 2, t * dp).seconds;

  const PipelineTime pt = opt.simulate_schedule && p > 1 ? pipeline_time_simulated(pc)
                                                         : pipeline_time_estimate(pc);
  StepBreakdown& b = c.time;
  b.simulated = pt.simulated;
  b.pipeline = pt.seconds;
  b.bubble = std::max(0.0, pt.seconds - pt.busiest);
  b.bubble_fraction = pt.bubble_fraction;
  b.p2p = pc.p2p_seconds;
  // The busiest rank is the one with the last chunk (the head) when v = 1.
  const double per_mb_chunks = double(mb) * double(v);
  b.compute = per_mb_chunks * lc * (lt.forward + lt.backward + lt.recompute) +
              double(mb) * (et.head_forward + et.head_backward);
  b.tp_comm = per_mb_chunks * lc * (lt.tp_forward + lt.tp_backward) + double(mb) * (et.tp_forward + et.tp_backward);
  b.zero3_gather = per_mb_chunks * 2 * zero3_chunk;

  // Data-parallel reduction of each stage's gradients; ZeRO-1/2 reduce-scatter
  // the gradients and all-gather the updated weights (the same volume as one
  // all-reduce), ZeRO-3 only reduce-scatters (weights are gathered per use).
  int64_t max_params = 0;
  for (const auto& s : c.stages) max_params = std::max(max_params, s.params);
  if (dp > 1) {
    const double grads = double(max_params) * per_param.grads;
    const double weights = double(max_params) * per_param.weights;
    if (par.zero_stage == 0)
      b.dp_reduce = collective_cost(sys, Collective::AllReduce, grads, dp, t).seconds;
    else if (par.zero_stage <= 2)
      b.dp_reduce = collective_cost(sys, Collective::ReduceScatter, grads, dp, t).seconds +
                    collective_cost(sys, Collective::AllGather, weights, dp, t).seconds;
    else
      b.dp_reduce = collective_cost(sys, Collective::ReduceScatter, grads, dp, t).seconds;
    // Buckets start reducing while the last micro-batch's backward runs.
    const double window = opt.dp_overlap ? double(v) * pc.backward[size_t(chunks / 2)] : 0.0;
    b.dp_exposed = std::max(0.0, b.dp_reduce - window);
  }
  if (p > 1) {
    const double emb = double(m.padded_vocab(t) / t) * double(m.hidden_size) * per_param.grads;
    b.embedding_sync = collective_cost(sys, Collective::AllReduce, emb, 2, (p - 1) * t * dp).seconds;
  }
  const double shard = par.zero_stage >= 1 ? double(dp) : 1.0;
  b.optimizer = kOptimizerBytesPerParam * double(max_params) / shard / sys.memory_bandwidth;
  b.step = b.pipeline + b.dp_exposed + b.embedding_sync + b.optimizer;

  const FlopCount fl = step_flops(m, par.global_batch, par.recompute);
  c.model_flops = fl.model;
  c.hardware_flops = fl.hardware;
  const double devices = double(L.devices());
  c.tokens_per_second = double(par.global_batch * m.seq_length) / b.step;
  c.tflops_per_device = fl.model / b.step / devices / 1e12;
  c.mfu = fl.model / (b.step * devices * peak_flops(sys, L.precision));
  c.hfu = fl.hardware / (b.step * devices * peak_flops(sys, L.precision));

  // What the step is mostly made of besides compute.
  const std::pair<double, const char*> parts[] = {
      {b.bubble, "pipeline bubble"},       {b.tp_comm, "tensor-parallel communication"},
      {b.dp_exposed, "data-parallel reduction"}, {b.zero3_gather, "ZeRO-3 weight gathers"},
      {b.optimizer, "optimizer step"},     {b.embedding_sync, "embedding sync"}};
  auto worst = *std::max_element(std::begin(parts), std::end(parts));
  c.limiter = fmt::format("compute {:.0f}% of step; largest overhead: {} {:.0f}%",
                          100 * b.compute / b.step, worst.second, 100 * worst.first / b.step);
  return c;
}

LayoutCost evaluate_layout(const GPTConfig& model, const SystemSpec& sys, const PlanLayout& L,
                           const CostOptions& opt) {
  ParamCounter params(model);
  return evaluate_layout(model, sys, L, params, opt);
}

}  // namespace tessera::plan
