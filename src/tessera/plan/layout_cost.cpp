#include "tessera/plan/layout_cost.h"

#include <algorithm>
#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/model/flops.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/kernel_cost.h"
#include "tessera/plan/pipeline_time.h"

namespace tessera::plan {

namespace {

// Flash attention's backward recomputes the scores: 5 matmuls against the
// forward's 2 (Dao et al. 2022), at similar efficiency.
constexpr double kFlashBackwardRatio = 2.5;

// Seconds of one transformer layer on one tp rank for one micro-batch, by
// kind of work as the engine's profile names it (core/profile.h): the
// kernels model/block.cpp calls, in its order. Op::Comm holds the
// tensor-parallel collectives (not overlapped with compute).
struct LayerOps {
  Profile forward, backward;
  Profile recompute;  // what backward re-runs of the forward (none / selective / full)
};

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
    auto cost = [&](Collective c) { return collective_cost(sys, c, bytes, t, 1).seconds; };
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

// The ends of the model for one micro-batch: the embedding lookup on the
// first stage; the final LayerNorm, the tied LM head over the tp-local
// vocabulary slice and the loss on the last (gpt.cpp).
struct EndOps {
  Profile embed_forward, embed_backward, head_forward, head_backward;
};

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
    auto cost = [&](Collective c, double b) { return collective_cost(sys, c, b, t, 1).seconds; };
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

std::string gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

}  // namespace

StageActivations stage_activations(const GPTConfig& m, const PlanLayout& L, int64_t stage) {
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages;
  const int64_t layers_per_chunk = m.num_layers / (p * v);
  StageActivations a;
  a.in_flight = in_flight_chunks(L.par.schedule, p, v, L.micro_batches(), stage);
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

namespace {

// The memory of each stage evaluated (every stage, or the first and the last:
// the extremes), and the peak.
void stage_memory(LayoutCost& c, const GPTConfig& m, const PlanLayout& L, ParamCounter& params,
                  const CostOptions& opt, const StateBytesPerParam& per_param,
                  double chunk_params) {
  const auto& par = L.par;
  const int64_t p = par.pp, dp = par.dp;
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
    sc.state = zero_state_bytes(double(sc.params), per_param, par.zero_stage, dp);
    StageActivations a = stage_activations(m, L, s);
    sc.activations = a.total;
    sc.layer_activations = a.layers;
    sc.in_flight = a.in_flight;
    // ZeRO-3 gathers a chunk's weights before using it, and prefetches the
    // next. fp32 (the engine): the gathered layer is a transient buffer that
    // the trainer's memory header (params + grads + optimizer + activations)
    // does not count, so neither does the prediction.
    if (par.zero_stage == 3 && dp > 1 && L.precision != Precision::FP32) sc.zero3_buffers = 2.0 * chunk_params * per_param.params;
    c.stages.push_back(sc);
    if (sc.memory() > c.peak_memory) c.peak_memory = sc.memory(), c.peak_stage = s;
  }
}

// Whether the peak stage fits the device, and if not, why.
void check_fits(LayoutCost& c, const SystemSpec& sys) {
  if (c.peak_memory > sys.usable_memory()) {
    const StageCost& w = *std::find_if(c.stages.begin(), c.stages.end(),
                                       [&](const StageCost& s) { return s.stage == c.peak_stage; });
    c.fits = false;
    c.why_not = fmt::format(
        "stage {} needs {} > {} usable (weights {}, grads {}, optimizer {}, activations {}{})",
        w.stage, gb(w.memory()), gb(sys.usable_memory()), gb(w.state.params), gb(w.state.grads),
        gb(w.state.optimizer), gb(w.activations),
        w.zero3_buffers > 0 ? ", zero-3 buffers " + gb(w.zero3_buffers) : "");
  }
}

// One micro-batch through one chunk of layers, by kind of work, and the
// ends' work (the first chunk adds the embedding, the last the head and
// loss); kernels at their in-step speed.
struct ChunkWork {
  Profile forward, backward;
  EndOps ends;
  double zero3_chunk = 0;  // per micro-batch per chunk: gather forward and again backward
};

ChunkWork chunk_work(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                     const StateBytesPerParam& per_param, double chunk_params,
                     int64_t layers_per_chunk) {
  const auto& par = L.par;
  const int64_t t = par.tp, dp = par.dp;
  ChunkWork w;
  LayerOps lo = layer_ops(m, sys, L);
  w.ends = end_ops(m, sys, L);
  EndOps& eo = w.ends;
  // Kernels run slower inside a step than alone (system in_situ factors).
  for (Profile* p : {&lo.forward, &lo.backward, &lo.recompute, &eo.embed_forward,
                     &eo.embed_backward, &eo.head_forward, &eo.head_backward})
    for (size_t k = 0; k < size_t(Op::kCount); ++k)
      if (Op(k) != Op::Comm) p->seconds[k] *= sys.in_situ.seconds[k];
  const double lc = double(layers_per_chunk);
  if (par.zero_stage == 3 && dp > 1)
    w.zero3_chunk = collective_cost(sys, Collective::AllGather, chunk_params * per_param.params * double(dp),
                                    dp, t).seconds;
  w.forward.add(lo.forward, lc);
  w.backward.add(lo.backward, lc).add(lo.recompute, lc);
  w.forward[Op::Comm] += w.zero3_chunk;
  w.backward[Op::Comm] += w.zero3_chunk;
  return w;
}

// Every chunk's forward and backward, and the activations' transfer between
// stages, for the pipeline's timing.
PipelineCosts pipeline_costs(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                             const ChunkWork& w) {
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp, dp = par.dp;
  PipelineCosts pc;
  pc.kind = L.par.schedule;
  pc.p = p;
  pc.v = v;
  pc.m = L.micro_batches();
  const int64_t chunks = p * v;
  pc.forward.assign(size_t(chunks), w.forward.total());
  pc.backward.assign(size_t(chunks), w.backward.total());
  pc.forward.front() += w.ends.embed_forward.total();
  pc.backward.front() += w.ends.embed_backward.total();
  pc.forward.back() += w.ends.head_forward.total();
  pc.backward.back() += w.ends.head_backward.total();
  const double elt = double(activation_element_bytes(L.precision));
  // Megatron's scatter/gather optimisation: each tp rank sends 1/t of the
  // (b s h) activation, the receiver all-gathers it over the fast link.
  const double p2p_bytes = elt * double(par.micro_batch * m.seq_length * m.hidden_size) / double(t);
  if (p > 1) pc.p2p_seconds = collective_cost(sys, Collective::SendRecv, p2p_bytes, 2, t * dp).seconds;
  return pc;
}

// What a rank of stage s does in one step, before the step-level work:
// m micro-batches through each of its v chunks (s, s + p, ...).
Profile stage_ops(const ChunkWork& w, const PlanLayout& L, int64_t s) {
  const int64_t p = L.par.pp, v = L.par.virtual_stages, mb = L.micro_batches();
  Profile ops;
  ops.add(w.forward, double(mb * v)).add(w.backward, double(mb * v));
  if (s == 0) ops.add(w.ends.embed_forward, double(mb)).add(w.ends.embed_backward, double(mb));
  if (s == p - 1) ops.add(w.ends.head_forward, double(mb)).add(w.ends.head_backward, double(mb));
  return ops;
}

// The step-level communication: the data-parallel gradient reduction and
// weight gather (b.dp_reduce, b.dp_exposed) and the tied embedding's sum
// between the first and last stages (b.embedding_sync).
void step_comm(StepBreakdown& b, const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
               const CostOptions& opt, const StateBytesPerParam& per_param, int64_t max_params,
               const PipelineCosts& pc) {
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp, dp = par.dp;
  const int64_t chunks = p * v;
  // Data-parallel reduction of each stage's gradients, per unit during the
  // last micro-batch's backward: an all-reduce (ZeRO-0) or a reduce-scatter
  // (1-3); the system's comm_overlap of it hides behind that backward. ZeRO-1
  // and 2 then all-gather the updated weights after the optimizer, which
  // nothing hides; ZeRO-3 gathers weights per use instead (zero3_chunk).
  if (dp > 1) {
    const double grads = double(max_params) * per_param.grads;
    const double weights = double(max_params) * per_param.params;
    const double reduce =
        par.zero_stage == 0 ? collective_cost(sys, Collective::AllReduce, grads, dp, t).seconds
                            : collective_cost(sys, Collective::ReduceScatter, grads, dp, t).seconds;
    const double gather = par.zero_stage == 1 || par.zero_stage == 2
                              ? collective_cost(sys, Collective::AllGather, weights, dp, t).seconds
                              : 0.0;
    b.dp_reduce = reduce + gather;
    const double window = opt.dp_overlap ? double(v) * pc.backward[size_t(chunks / 2)] : 0.0;
    b.dp_exposed = reduce - sys.comm_overlap * std::min(reduce, window) + gather;
  }
  if (p > 1) {
    const double emb = double(m.padded_vocab(t) / t) * double(m.hidden_size) * per_param.grads;
    b.embedding_sync = collective_cost(sys, Collective::AllReduce, emb, 2, (p - 1) * t * dp).seconds;
  }
}

// AdamW and the gradient norm over what this rank owns: its dp shard from
// ZeRO-1 on (the norm: ZeRO-0 reads the whole reduced gradient).
void add_step_kernels(const SystemSpec& sys, const PlanLayout& L, int64_t params, Profile& ops) {
  const double shard = L.par.zero_stage >= 1 ? double(L.par.dp) : 1.0;
  const double elt = double(activation_element_bytes(L.precision));
  ops[Op::Optimizer] += kernel_seconds(sys, Kernel::AdamW, double(params) / shard, elt);
  ops[Op::GradNorm] += kernel_seconds(sys, Kernel::GradNorm, double(params) / shard, elt);
}

// Throughput and utilisation from the step time, and what the step is
// mostly made of besides compute.
void add_throughput(LayoutCost& c, const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const StepBreakdown& b = c.time;
  const FlopCount fl = step_flops(m, par.global_batch, par.recompute);
  c.model_flops = fl.model;
  c.hardware_flops = fl.hardware;
  const double devices = double(L.devices());
  c.tokens_per_second = double(par.global_batch * m.seq_length) / b.step;
  c.tflops_per_device = fl.model / b.step / devices / 1e12;
  c.mfu = fl.model / (b.step * devices * peak_flops(sys, L.precision));
  c.hfu = fl.hardware / (b.step * devices * peak_flops(sys, L.precision));

  const std::pair<double, const char*> parts[] = {
      {b.bubble, "pipeline bubble"},       {b.tp_comm, "tensor-parallel communication"},
      {b.dp_exposed, "data-parallel reduction"}, {b.zero3_gather, "ZeRO-3 weight gathers"},
      {b.optimizer, "optimizer step"},     {b.embedding_sync, "embedding sync"},
      {b.sync_wait, "waiting at synchronisations"}};
  auto worst = *std::max_element(std::begin(parts), std::end(parts));
  c.limiter = fmt::format("compute {:.0f}% of step; largest overhead: {} {:.0f}%",
                          100 * b.compute / b.step, worst.second, 100 * worst.first / b.step);
}

}  // namespace

LayoutCost evaluate_layout(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                           ParamCounter& params, const CostOptions& opt) {
  const auto& par = L.par;
  par.validate(m, L.devices());
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp;
  const int64_t mb = L.micro_batches();

  LayoutCost c;
  c.layout = L;
  const StateBytesPerParam per_param = state_bytes_per_param(L.precision);
  const int64_t layers_per_chunk = m.num_layers / (p * v);
  const double chunk_params = double(params.layer_params(t) * layers_per_chunk);

  // ---- memory per stage -------------------------------------------------
  stage_memory(c, m, L, params, opt, per_param, chunk_params);
  check_fits(c, sys);

  // ---- time -------------------------------------------------------------
  const ChunkWork w = chunk_work(m, sys, L, per_param, chunk_params, layers_per_chunk);
  const PipelineCosts pc = pipeline_costs(m, sys, L, w);
  const PipelineTime pt = opt.simulate_schedule && p > 1 ? pipeline_time_simulated(pc)
                                                         : pipeline_time_estimate(pc);
  StepBreakdown& b = c.time;
  b.simulated = pt.simulated;
  b.pipeline = pt.seconds;
  b.bubble = std::max(0.0, pt.seconds - pt.busiest);
  b.bubble_fraction = pt.bubble_fraction;
  b.p2p = pc.p2p_seconds;

  // The busiest rank is the one with the last chunk (the head).
  const Profile busiest = stage_ops(w, L, p - 1);
  b.zero3_gather = double(mb * v) * 2 * w.zero3_chunk;
  b.tp_comm = busiest[Op::Comm] - b.zero3_gather;
  b.compute = busiest.total() - busiest[Op::Comm];

  int64_t max_params = 0;
  for (const auto& s : c.stages) max_params = std::max(max_params, s.params);
  step_comm(b, m, sys, L, opt, per_param, max_params, pc);
  Profile largest;
  add_step_kernels(sys, L, max_params, largest);
  b.optimizer = largest[Op::Optimizer] + largest[Op::GradNorm];
  // Ranks that synchronise wait for the late one at every collective.
  b.sync_wait = sys.sync_wait * syncs_per_step(L, layers_per_chunk);
  b.step = b.pipeline + b.dp_exposed + b.embedding_sync + b.optimizer + b.sync_wait;
  for (auto& sc : c.stages) {
    sc.ops = stage_ops(w, L, sc.stage);
    add_step_kernels(sys, L, sc.params, sc.ops);
    sc.ops[Op::Comm] += b.dp_exposed + b.sync_wait;
    if (p > 1 && (sc.stage == 0 || sc.stage == p - 1)) sc.ops[Op::Comm] += b.embedding_sync;
  }

  add_throughput(c, m, sys, L);
  return c;
}

LayoutCost evaluate_layout(const GPTConfig& model, const SystemSpec& sys, const PlanLayout& L,
                           const CostOptions& opt) {
  ParamCounter params(model);
  return evaluate_layout(model, sys, L, params, opt);
}

}  // namespace tessera::plan
