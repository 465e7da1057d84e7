#include "tessera/plan/layout_cost.h"

#include <algorithm>
#include <vector>
#include <fmt/format.h>

#include "tessera/comm/grid_layout.h"
#include "tessera/core/error.h"
#include "tessera/model/block.h"
#include "tessera/model/flops.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/context_parallel_cost.h"
#include "tessera/plan/eager_kernels.h"
#include "tessera/plan/fsdp_pipelining.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/kernels/backend.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/moe_cost.h"
#include "tessera/plan/op_sac.h"
#include "tessera/plan/pipeline_time.h"
#include "tessera/plan/straggler.h"

namespace tessera::plan {

namespace {

std::string gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

// ZeRO-3 as FSDP (FULL_SHARD) and DeepSpeed run it on GPUs: per unit (a
// layer), gathers prefetched behind compute and gradients reduce-scattered
// as each unit's backward ends, every micro-batch. The engine (fp32, or
// L.engine) gathers each unit when it needs it and reduces once a step.
bool zero3_framework(const PlanLayout& L) {
  return L.par.zero_stage == 3 && dp_cp(L.par) > 1 && !L.engine && L.precision != Precision::Fp32;
}

// Bytes a gradient element moves in the data-parallel reduction: the run's
// reduce dtype where it states one (PlanLayout::grad_reduce_bytes), else the
// precision's gradient bytes.
double grad_reduce_bytes(const PlanLayout& L, const StateBytesPerParam& per_param) {
  return L.grad_reduce_bytes > 0 ? L.grad_reduce_bytes : per_param.grads;
}

// Bytes a parameter of FSDP1's unsharded flat gradient moves on the
// post-backward stream before its reduce-scatter can start (torch 2.1
// fsdp/_runtime_utils.py _post_backward_hook and _reduce_grad): the cast to
// reduce_dtype when it differs from the 16-bit gradient (read 2, write 4),
// then _div_if_needed by the gradient pre-divide factor (in place, read and
// write in the reduce dtype), which _get_gradient_predivide_factor makes > 1
// for every dp >= 2 (a ZeRO-3 framework layout has dp >= 2). 0 unless the
// layout is FSDP1's (fsdp1_flat_grads).
double fsdp1_staging_bytes(const PlanLayout& L, const StateBytesPerParam& per_param) {
  if (!L.fsdp1_flat_grads) return 0;
  const double reduce = grad_reduce_bytes(L, per_param);
  const double cast = reduce != 2.0 ? 2.0 + reduce : 0.0;
  return cast + 2.0 * reduce;
}

// The parameters of ZeRO-3's largest unit on one tp rank: a transformer
// layer, or the (vocab-parallel) embedding / output layer when larger.
double zero3_unit_params(const GPTConfig& m, int64_t tp, double layer_params) {
  return std::max(layer_params, double(m.padded_vocab(tp) / tp) * double(m.hidden_size));
}

}  // namespace

StageActivations stage_activations(const GPTConfig& model, const PlanLayout& L, int64_t stage) {
  const auto& par = L.par;
  // Context parallelism: a rank's activations are its T / cp tokens'.
  const GPTConfig m = cp_local_model(model, par.cp);
  // ... and, while a layer's attention runs, the K / V exchange's blocks.
  const double cp_buffers = cp_buffer_bytes(model, L);
  const int64_t p = par.pp, v = par.virtual_stages;
  // Uneven stages (--decoder-first/last-pipeline-num-layers) hold their own count.
  const int64_t layers_per_chunk = par.chunk_layer_count(m.num_layers, stage);
  StageActivations a;
  a.in_flight = in_flight_chunks(L.par.schedule, p, v, L.micro_batches(), stage);
  const double held_layers = double(a.in_flight * layers_per_chunk);
  // The head's stage: the last, or rank 0 under zbv's V (chunk_placement.h).
  const bool has_head = stage == chunk_rank(p, p * v - 1, par.placement());
  const bool split_backward = splits_backward(par.schedule);
  if (L.precision == Precision::Fp32 || L.engine) {
    // The engine's arena (fp32, or 16-bit GEMM activations under --bf16 /
    // --fp16), built from the same ActShape the engine builds
    // (GPT::stage_act_shape: recompute, sequence parallelism, precision,
    // this stage's layers per chunk and head): the executor allocates one
    // full arena per in-flight slot (peak_in_flight of the schedule; one
    // without a pipeline), and the metrics header reports exactly their
    // bytes, plus the cp ring's scratch (cp_buffers, the same in both).
    ActShape shape = engine_shape(m, par.micro_batch, par.tp, layers_per_chunk, has_head,
                                  par.sequence_parallel, par.recompute, L.precision);
    // Which of the stage's layers are MoE layers, as GPT::stage_act_shape
    // marks them (GPTConfig::moe_layer of its global layers).
    if (m.moe()) set_layer_kinds(shape, m, par.stage_layer_list(m.num_layers, stage), v);
    // Expert parallelism: the MoE layers' expert-side views (ep x R rows),
    // as GPT::act_shape sets them.
    if (m.moe()) shape.ep = moe_ep(L);
    // A layer's views: the mean over the stage's layers (MoE and dense
    // layers carve different ones under --moe-layer-freq > 1), each the
    // difference one more layer of its kind makes.
    auto layer_bytes = [&](uint8_t kind) {
      ActShape one = shape;
      one.L = 1, one.has_head = false, one.mlp_kinds = {kind};
      ActShape two = one;
      two.L = 2, two.mlp_kinds = {kind, kind};
      return double(activations_bytes(two) - activations_bytes(one));
    };
    double per_layer = 0;
    for (int64_t i = 0; i < shape.L; ++i) per_layer += layer_bytes(shape.mlp_kind(i));
    per_layer /= double(std::max<int64_t>(1, shape.L));
    a.layers = held_layers * per_layer;
    a.total = double(a.in_flight) * double(activations_bytes(shape)) + cp_buffers;
    // zb-h1, zbv: each slot also keeps its layers' GEMM output gradients from
    // the input pass to the weight pass (the executor's stash, model/block.h).
    if (split_backward)
      a.total += double(a.in_flight * shape.L * layer_grad_stash_bytes(shape));
    return a;
  }
  // torchtitan's op-level SAC keeps its saved ops' outputs (op_sac.h), not
  // Megatron's selective set.
  a.layers = held_layers * (L.torchtitan_op_sac && par.recompute == Recompute::Selective
                                ? op_sac_layer_bytes(m, par.micro_batch, par.tp, par.sequence_parallel)
                                : korthikanti_layer_bytes(m, par.micro_batch, par.tp, par.sequence_parallel,
                                                          par.recompute, L.flash_attention, L.fp8,
                                                          L.gpt_without_dropout));
  a.total = a.layers + cp_buffers;
  // Recomputing a layer in backward materialises its full activations once.
  if (par.recompute != Recompute::None)
    a.total += korthikanti_layer_bytes(m, par.micro_batch, par.tp, par.sequence_parallel,
                                       Recompute::None, L.flash_attention, L.fp8,
                                       L.gpt_without_dropout);
  const double sbh = double(m.seq_length * par.micro_batch * m.hidden_size);
  // First stage: the embedding dropout's 1-byte mask of each in-flight
  // micro-batch, Korthikanti §4.3: sbh, /t with SP. (The embedding output
  // itself is the first layer's input, already counted.)
  // (None in a model trained without dropout: memory_model.h.)
  if (stage == 0 && stores_dropout_masks(m, L.gpt_without_dropout))
    a.total += double(a.in_flight) * sbh / (par.sequence_parallel ? double(par.tp) : 1.0);
  // Last stage: the fp32 logits and their gradient for the micro-batch in
  // backward: 2 * 4 s b V / t.
  if (has_head)
    a.total += 8.0 * double(m.seq_length * par.micro_batch) * double(m.padded_vocab(par.tp) / par.tp);
  // The split backward's stash of GEMM output gradients, as the engine's (above).
  if (split_backward)
    a.total += double(a.in_flight * layers_per_chunk) *
               double(layer_grad_stash_bytes(engine_shape(m, par.micro_batch, par.tp, 1, false,
                                                          par.sequence_parallel, par.recompute,
                                                          L.precision)));
  return a;
}

namespace {

// The memory of each stage evaluated (every stage, or the first and the last:
// the extremes), and the peak.
void stage_memory(LayoutCost& c, const GPTConfig& m, const PlanLayout& L, ParamCounter& params,
                  const CostOptions& opt, const StateBytesPerParam& per_param,
                  double layer_params) {
  const auto& par = L.par;
  const int64_t p = par.pp, dp = dp_cp(par);  // ZeRO shards over dp x cp
  std::vector<int64_t> which;
  if (opt.all_stages || p <= 2) {
    for (int64_t s = 0; s < p; ++s) which.push_back(s);
  } else if (par.uneven_stages()) {
    which = {0, 1, p - 1};  // the middle stages hold equal layers, maybe the most
  } else {
    which = {0, p - 1};
  }
  for (int64_t s : which) {
    StageCost sc;
    sc.stage = s;
    sc.params = params.stage_params(par, s);
    sc.state = zero_state_bytes(double(sc.params), per_param, par.zero_stage, dp);
    // Mixture of experts: the experts over the expert-parallel ranks (moe_cost.h).
    if (m.moe()) sc.state = moe_stage_state(params, par, s, per_param, moe_ep(L));
    // FP8 (Transformer Engine): each weight's FP8 copy and its transpose
    // beside the 16-bit one, 2 bytes a parameter, sharded only with it.
    // (torchao casts each weight as its linear runs and keeps no copy.)
    if (L.fp8 && !L.fp8_torchao) sc.state.params += 2.0 * double(sc.params) / (par.zero_stage == 3 ? double(dp) : 1.0);
    // FSDP2 under torch.distributed.pipelining: the stage's gradients held
    // unsharded until the step's last backward (fsdp_pipelining.h).
    sc.state.grads += fsdp2_pipelining_grad_bytes(L, double(sc.params));
    // ZeRO-2/3 under zb-h1 / zbv: the engine holds the stage's gradient
    // unsharded from the first input pass to the last weight pass.
    sc.state.grads += split_backward_grad_bytes(double(sc.params), per_param, par.zero_stage,
                                                par.split_backward());
    StageActivations a = stage_activations(m, L, s);
    sc.activations = a.total;
    sc.layer_activations = a.layers;
    sc.in_flight = a.in_flight;
    // ZeRO-3 gathers weights before using them. The engine (fp32, or
    // L.engine): the gathered layer is a transient buffer that the trainer's
    // memory header (params + grads + optimizer + activations) does not
    // count, so neither does the prediction. FSDP and DeepSpeed gather one
    // unit (a layer, or the embedding / output layer) at a time and prefetch
    // the next, and reduce-scatter each unit's gradients as its backward
    // ends: at most two units' full weights and two units' full gradients
    // in flight (zero3_unit_params), never the whole chunk.
    if (zero3_framework(L))
      sc.zero3_buffers = 2.0 * zero3_unit_params(m, par.tp, layer_params) *
                         (per_param.params + per_param.grads);
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
    c.over_memory = c.peak_memory - sys.usable_memory();
    c.why_not = fmt::format(
        "stage {} needs {} > {} usable (weights {}, grads {}, optimizer {}, activations {}{})",
        w.stage, gb(w.memory()), gb(sys.usable_memory()), gb(w.state.params), gb(w.state.grads),
        gb(w.state.optimizer), gb(w.activations),
        w.zero3_buffers > 0 ? ", zero-3 buffers " + gb(w.zero3_buffers) : "");
  }
}

// One micro-batch through one layer, by kind of work, and the ends' work
// (the first chunk adds the embedding, the last the head and loss); kernels
// at their in-step speed. A chunk of stage s is chunk_layers[s] layers
// (uneven stages: --decoder-first/last-pipeline-num-layers).
struct ChunkWork {
  Profile layer_forward, layer_backward;  // backward: with the layer's recompute
  // zb-h1: the layer's weight pass (seconds), within layer_backward: its dW
  // GEMMs and, under recomputation, the recompute it runs again.
  double layer_weight = 0;
  // Context parallelism: the layer's exposed K / V exchange per micro-batch
  // (forward, backward, recompute), within the profiles' Op::Comm.
  double layer_cp_comm = 0;
  EndOps ends;
  std::vector<int64_t> chunk_layers;  // (pp) layers per chunk of each stage
  // ZeRO-3 (0 without), per micro-batch through one chunk of stage s: its
  // weights' all-gather (in forward, and again in backward) and, in a GPU
  // framework (FSDP, DeepSpeed), its gradients' reduce-scatter in backward.
  std::vector<double> zero3_gather, zero3_reduce;  // (pp) seconds
  // Gathers per backward: 2 under zb-h1 / zbv, whose weight pass gathers
  // the layer again (DataParallel::before_backward_weight), else 1.
  double backward_gathers = 1.0;
  // FSDP and DeepSpeed prefetch the next unit's gather while a unit
  // computes and reduce-scatter a unit's gradients while the next computes:
  // only the first unit's gather of a pass and the last unit's
  // reduce-scatter wait, and what the compute cannot cover (overlapped()).
  // The engine gathers each unit when it needs it: all of it waits.
  bool zero3_overlapped = false;
  double comm_overlap = 1.0;

  // One micro-batch through one chunk of stage s: its layers and the
  // ZeRO-3 communication it waits for.
  Profile forward(int64_t s) const { return chunk(layer_forward, s, zero3_gather[size_t(s)], 0.0); }
  Profile backward(int64_t s) const {
    return chunk(layer_backward, s, backward_gathers * zero3_gather[size_t(s)],
                 zero3_reduce[size_t(s)]);
  }
  // The ZeRO-3 seconds one micro-batch through a chunk of stage s waits for.
  double zero3_exposed(int64_t s) const {
    return forward(s)[Op::Comm] + backward(s)[Op::Comm] -
           double(chunk_layers[size_t(s)]) * (layer_forward[Op::Comm] + layer_backward[Op::Comm]);
  }

 private:
  // gather, reduce: the chunk's ZeRO-3 all-gather and reduce-scatter in this pass.
  Profile chunk(const Profile& layer, int64_t s, double gather, double reduce) const {
    Profile c;
    const double layers = double(chunk_layers[size_t(s)]);
    c.add(layer, layers);
    if (!zero3_overlapped) {
      c[Op::Comm] += gather + reduce;
      return c;
    }
    const double ends = (gather + reduce) / layers;  // the first unit's gather, the last's reduce
    const double compute = c.total() - c[Op::Comm];
    c[Op::Comm] += ends + overlapped(gather + reduce - ends, compute);
    return c;
  }

  // The seconds a pass waits beyond its compute when `comm` seconds of
  // collectives run beside `compute` seconds of it. comm_overlap is what
  // `tessera calibrate` measures (and a GPU file cites): the fraction of a
  // collective that compute twice its length hides, (compute + comm - both)
  // / comm. On a GPU the gap is contention: the collective's kernels take
  // SMs and memory bandwidth, so the compute beside it runs slower, by
  // 1 / comm_overlap - 1, and each second of collective costs
  // 1 - comm_overlap seconds of compute; a collective longer than the
  // compute it slows shows past it. comm_overlap 1: max(0, comm - compute).
  double overlapped(double comm, double compute) const {
    return std::max((1.0 - comm_overlap) * comm, comm - compute);
  }
};

ChunkWork chunk_work(const GPTConfig& m, const OpList& ol, const SystemSpec& sys,
                     const PlanLayout& L, const StateBytesPerParam& per_param,
                     double layer_params) {
  const auto& par = L.par;
  const int64_t t = par.tp, dp = dp_cp(par);  // ZeRO-3's group: dp x cp
  ChunkWork w;
  LayerOps lo = layer_ops(ol, sys, L);
  // Eager RoPE, which the engine's op list folds into its attention kernel:
  // a memory-bound pass each way, and again in a full recompute.
  if (L.eager_elementwise && m.rope()) {
    const double rope = eager_rope_bytes(cp_local_model(m, par.cp), L) / sys.achieved_memory_bandwidth();
    lo.forward[Op::Cast] += rope;
    lo.backward[Op::Cast] += rope;
    if (par.recompute == Recompute::Full) lo.recompute[Op::Cast] += rope;
  }
  // torchtitan's op-level SAC recomputes more than the attention core.
  if (L.torchtitan_op_sac && par.recompute == Recompute::Selective)
    lo.recompute = op_sac_recompute(m, sys, L, lo.forward);
  w.ends = end_ops(ol, sys, L);
  EndOps& eo = w.ends;
  // Kernels run slower inside a step than alone (system in_situ factors,
  // measured on a step of the layout's precision where the system has one).
  const Profile& in_situ = sys.in_situ_for(L.precision, par.micro_batch);
  for (Profile* p : {&lo.forward, &lo.backward, &lo.recompute, &lo.weight, &eo.embed_forward,
                     &eo.embed_backward, &eo.head_forward, &eo.head_backward})
    for (size_t k = 0; k < size_t(Op::kCount); ++k)
      if (Op(k) != Op::Comm) p->seconds[k] *= in_situ.seconds[k];
  // Context parallelism: the K / V exchange, what of it the attention on
  // the block in hand does not hide (context_parallel_cost.h).
  if (par.cp > 1) {
    const CpLayerComm cc =
        cp_layer_comm(m, sys, L, lo.forward[Op::Attention], lo.backward[Op::Attention]);
    lo.forward[Op::Comm] += cc.forward_exposed;
    lo.backward[Op::Comm] += cc.backward_exposed;
    lo.recompute[Op::Comm] += cc.recompute_exposed;
    w.layer_cp_comm = cc.forward_exposed + cc.backward_exposed + cc.recompute_exposed;
  }
  // Mixture of experts under expert parallelism: the all-to-all dispatch
  // and combine (waited for), and the slowest rank's extra expert rows.
  if (m.moe() && moe_ep(L) > 1) {
    const MoeAllToAll a2a = moe_all_to_all(m, sys, L, moe_ep(L), t);
    lo.forward[Op::Comm] += a2a.forward;
    lo.backward[Op::Comm] += a2a.backward;
    if (par.recompute == Recompute::Full) lo.recompute[Op::Comm] += a2a.forward;
    const MoePhaseSeconds slow = moe_imbalance_seconds(
        ol, sys, L, moe_imbalance_factor(L.moe_imbalance, moe_ep(L)));
    lo.forward[Op::Gemm] += slow.forward * in_situ[Op::Gemm];
    lo.backward[Op::Gemm] += slow.backward * in_situ[Op::Gemm];
    lo.recompute[Op::Gemm] += slow.recompute * in_situ[Op::Gemm];
  }
  w.layer_forward = lo.forward;
  w.layer_backward.add(lo.backward, 1.0).add(lo.recompute, 1.0);
  // zb-h1's and zbv's weight pass: the calls block_backward_weight makes
  // (the weight-gradient GEMMs at their own shapes' rates, their bias sums,
  // SP's gathers; LayerOps::weight), and the layer recomputed again before
  // it. (It was half the backward GEMM time: on this CPU a dW GEMM, (out,
  // in) over the N rows, runs at another rate than its dX twin, and the
  // bias sums are memory-bound passes over dY.)
  if (splits_backward(par.schedule)) {
    w.layer_backward.add(lo.recompute, 1.0);
    w.layer_weight = lo.weight.total() + lo.recompute.total();
    // In fp32 the input pass copies two output gradients into the stash,
    // the MLP's and the attention projection's dY ((N, C) each: block.cpp
    // `linear`; the other two GEMMs write theirs there directly), which the
    // combined backward reads where they are. (Under bf16 / fp16 the same
    // rounding happens in either backward.)
    if (L.precision == Precision::Fp32 && !L.fp8) {
      const int64_t n = par.micro_batch * (m.seq_length / par.cp) * m.hidden_size;
      for (const kernels::KernelCall& k : kernels::Backend::cast_cost(Precision::Fp32, Precision::Fp32, n))
        w.layer_backward[Op::Cast] += 2.0 * in_situ[Op::Cast] *
                                      sys.kernel_seconds(k.kernel, double(k.elements),
                                                         k.bytes_read + k.bytes_written);
    }
  }
  // ZeRO-3 units (a layer each) are gathered in 16 bits from the dp shards
  // (per_param.params bytes a parameter) and, in a GPU framework, their
  // gradients reduce-scattered every micro-batch (grad_reduce_bytes).
  w.zero3_overlapped = zero3_framework(L);
  w.backward_gathers = par.split_backward() ? 2.0 : 1.0;
  w.comm_overlap = sys.comm_overlap;
  for (int64_t s = 0; s < par.pp; ++s) {
    const int64_t lc = par.chunk_layer_count(m.num_layers, s);
    w.chunk_layers.push_back(lc);
    const bool zero3 = par.zero_stage == 3 && dp > 1;
    // A gather's size is what each rank ends up holding: the chunk's
    // parameters on this tp rank, every dp shard of them (each rank receives
    // (dp - 1) / dp of it: comm_model.cpp). Not times dp.
    const double chunk_params = double(lc) * layer_params;
    auto cost = [&](CommOp op, double bytes_per_param) {
      return collective_cost(sys, op, chunk_params * bytes_per_param, dp, t, L.devices()).seconds;
    };
    w.zero3_gather.push_back(zero3 ? cost(CommOp::AllGather, per_param.params) : 0.0);
    w.zero3_reduce.push_back(zero3 && w.zero3_overlapped
                                 ? cost(CommOp::ReduceScatter, grad_reduce_bytes(L, per_param)) +
                                       chunk_params * fsdp1_staging_bytes(L, per_param) /
                                           sys.achieved_memory_bandwidth()
                                 : 0.0);
  }
  // FSDP1's parameters are views of the unit's flat parameter (torch.split
  // then view), so autograd's split backward copies each layer's 16-bit
  // gradients into the flat gradient (read 2, write 2 bytes a parameter) on
  // the compute stream, every micro-batch (zero3_overlapped: ZeRO-3 over dp >= 2).
  if (L.fsdp1_flat_grads && w.zero3_overlapped) {
    const double copy = 4.0 * layer_params / sys.achieved_memory_bandwidth();
    w.layer_backward[Op::Cast] += copy;
  }
  // FSDP2 under pipelining folds each layer's fresh gradients into its
  // unsharded accumulator every micro-batch (fsdp_pipelining.h).
  w.layer_backward[Op::Cast] += fsdp2_pipelining_accumulate_seconds(sys, L, layer_params);
  return w;
}

// Every chunk's forward and backward, and the activations' transfer between
// stages, for the pipeline's timing.
PipelineCosts pipeline_costs(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
                             const ChunkWork& w) {
  const auto& par = L.par;
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp, dp = par.dp, cp = par.cp;
  PipelineCosts pc;
  pc.kind = L.par.schedule;
  pc.p = p;
  pc.v = v;
  pc.m = L.micro_batches();
  // Global chunk g runs on its placement's rank (g % p; zbv's V).
  const ChunkPlacement pl = par.placement();
  for (int64_t g = 0; g < p * v; ++g) {
    pc.forward.push_back(w.forward(chunk_rank(p, g, pl)).total());
    pc.backward.push_back(w.backward(chunk_rank(p, g, pl)).total());
  }
  pc.forward.front() += w.ends.embed_forward.total();
  pc.backward.front() += w.ends.embed_backward.total();
  pc.forward.back() += w.ends.head_forward.total();
  pc.backward.back() += w.ends.head_backward.total();
  // zb-h1's and zbv's weight pass, chunk by chunk: its layers' (ChunkWork::
  // layer_weight); the head's, the embedding's and the norms' gradients stay
  // in the input pass (model/gpt.h), so the head's chunk has the smallest
  // share of its backward in W.
  const bool split = splits_backward(pc.kind);
  // ZeRO-3: the weight pass waits for its own gather of the chunk's layers.
  for (int64_t g = 0; g < p * v && split; ++g) {
    const int64_t s = chunk_rank(p, g, pl);
    const double gather = w.zero3_overlapped ? 0.0 : w.zero3_gather[size_t(s)];
    pc.weight.push_back(std::min(pc.backward[size_t(g)],
                                 double(w.chunk_layers[size_t(s)]) * w.layer_weight + gather));
  }
  const double elt = double(activation_element_bytes(L.precision));
  // Megatron's scatter/gather optimisation: each tp rank sends 1/t of the
  // (b s h) activation, the receiver all-gathers it over the fast link.
  // (A cp rank sends its own T / cp tokens; stages are tp x cp x dp ranks apart.)
  const double p2p_bytes =
      elt * double(par.micro_batch * (m.seq_length / cp) * m.hidden_size) / double(t);
  if (p > 1)
    pc.p2p_seconds = collective_cost(sys, CommOp::Send, p2p_bytes, 2, t * cp * dp, L.devices()).seconds;
  return pc;
}

// What a rank of stage s does in one step, before the step-level work:
// m micro-batches through each of its v chunks (s, s + p, ...).
Profile stage_ops(const ChunkWork& w, const PlanLayout& L, int64_t s) {
  const int64_t p = L.par.pp, v = L.par.virtual_stages, mb = L.micro_batches();
  Profile ops;
  ops.add(w.forward(s), double(mb * v)).add(w.backward(s), double(mb * v));
  if (s == 0) ops.add(w.ends.embed_forward, double(mb)).add(w.ends.embed_backward, double(mb));
  if (s == chunk_rank(p, p * v - 1, L.par.placement()))  // the last stage; zbv: rank 0
    ops.add(w.ends.head_forward, double(mb)).add(w.ends.head_backward, double(mb));
  return ops;
}

// The stage whose ranks work longest in a step (the last, with the head, on
// an even split; ties go to the later stage). per_stage: stage_ops of each.
int64_t busiest_stage(const std::vector<Profile>& per_stage) {
  int64_t busiest = int64_t(per_stage.size()) - 1;
  for (int64_t s = busiest - 1; s >= 0; --s)
    if (per_stage[size_t(s)].total() > per_stage[size_t(busiest)].total()) busiest = s;
  return busiest;
}

// The step-level communication: the data-parallel gradient reduction and
// weight gather (b.dp_reduce, b.dp_exposed) and the tied embedding's sum
// between the first and last stages (b.embedding_sync).
void step_comm(StepBreakdown& b, const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L,
               const CostOptions& opt, const StateBytesPerParam& per_param, int64_t max_params,
               const PipelineCosts& pc) {
  const auto& par = L.par;
  // Gradients reduce over dp x cp (each cp rank saw part of every sequence).
  const int64_t p = par.pp, v = par.virtual_stages, t = par.tp, dp = dp_cp(par);
  const int64_t chunks = p * v;
  // Data-parallel reduction of each stage's gradients: an all-reduce
  // (ZeRO-0) or a reduce-scatter (1-3). With --overlap-grad-reduce it runs
  // per unit during the last micro-batch's backward, and the system's
  // comm_overlap of it hides behind that backward; without, it follows the
  // backward. ZeRO-1 and 2 then all-gather the updated weights after the
  // optimizer: exposed, or with --overlap-param-gather hidden (comm_overlap
  // of it) behind the next step's first forward. ZeRO-3 gathers weights
  // per use instead (ChunkWork::zero3_gather), and a GPU framework's
  // ZeRO-3 reduce-scatters per micro-batch there too: nothing is left for
  // the step's end.
  if (dp > 1 && !zero3_framework(L)) {
    const double grads = double(max_params) * grad_reduce_bytes(L, per_param);
    const double weights = double(max_params) * per_param.params;
    double reduce =
        par.zero_stage == 0 ? collective_cost(sys, CommOp::AllReduce, grads, dp, t, L.devices()).seconds
                            : collective_cost(sys, CommOp::ReduceScatter, grads, dp, t, L.devices()).seconds;
    double gather = par.zero_stage == 1 || par.zero_stage == 2
                        ? collective_cost(sys, CommOp::AllGather, weights, dp, t, L.devices()).seconds
                        : 0.0;
    // Expert parallelism: the experts' E / ep reduce (and gather) over the
    // dp x cp / ep ranks holding the same ones, tp x ep apart (moe_cost.h).
    if (m.moe() && moe_ep(L) > 1) {
      const int64_t ep = moe_ep(L);
      const double experts = std::max(moe_stage_expert_params(m, par, 0),
                                      moe_stage_expert_params(m, par, p - 1));
      const double dense = std::max(0.0, double(max_params) - experts), mine = experts / double(ep);
      const CommOp op = par.zero_stage == 0 ? CommOp::AllReduce : CommOp::ReduceScatter;
      const double g = grad_reduce_bytes(L, per_param);
      reduce = collective_cost(sys, op, dense * g, dp, t, L.devices()).seconds +
               collective_cost(sys, op, mine * g, dp / ep, t * ep, L.devices()).seconds;
      if (gather > 0)
        gather = collective_cost(sys, CommOp::AllGather, dense * per_param.params, dp, t, L.devices()).seconds +
                 collective_cost(sys, CommOp::AllGather, mine * per_param.params, dp / ep, t * ep,
                                 L.devices()).seconds;
    }
    b.dp_reduce = reduce + gather;
    const double window = L.overlap_grad_reduce ? double(v) * pc.backward[size_t(chunks / 2)] : 0.0;
    const double next_forward =
        L.overlap_param_gather ? double(v) * pc.forward[size_t(chunks / 2)] : 0.0;
    b.dp_exposed = reduce - sys.comm_overlap * std::min(reduce, window) + gather -
                   sys.comm_overlap * std::min(gather, next_forward);
  }
  // Untied: the first stage's wte and the last stage's lm_head are separate
  // parameters, so nothing is summed between them; nor under zbv's V, where
  // rank 0 holds both ends and sums the table's gradient in place.
  if (p > 1 && !m.untie_embeddings && par.placement() == ChunkPlacement::RoundRobin) {
    const double emb = double(m.padded_vocab(t) / t) * double(m.hidden_size) * per_param.grads;
    b.embedding_sync =
        collective_cost(sys, CommOp::AllReduce, emb, 2, (p - 1) * t * dp, L.devices()).seconds;
  }
}

// A CPU system running more ranks x threads than it has cores: Open MPI's
// --bind-to core places rank r on core slot r mod slots (bench/tune.sh binds
// so; floating, the scheduler moves ranks and a step varies far more), and
// the ranks of one core share its time. Whenever they are busy together the
// core runs their work one after the other, so the step is at least the
// busiest core's summed busy time: data- or tensor-parallel partners on one
// core, busy at once, take twice as long. Ranks that take turns anyway (the
// stages of a pipeline running one micro-batch) lose nothing: the schedule's
// step is already longer than their sum. The seconds this adds to the step.
// Added on an older calibration whose tables hold a share of the sharing too
// (SystemSpec::kernels_include_sharing; warned of): counted twice, the plans
// run long (2.1x on bench/tune.sh's 672 4-rank layouts) but rank the layouts
// well (rank correlation with the measured steps 0.74), and without it they
// ran 1.34x and ranked nothing (0.06): the share in the tables is the same
// for every layout, the sharing is not.
double core_sharing(const SystemSpec& sys, const PlanLayout& L,
                    const std::vector<Profile>& per_stage, const StepBreakdown& b) {
  if (sys.cores <= 0) return 0;  // GPUs: one rank per device
  const int64_t slots = core_slots(sys.cores, sys.calibrated_threads);
  const int64_t ranks = L.devices();
  if (ranks <= slots) return 0;
  const int64_t p = L.par.pp;
  const comm::GridLayout grid{.world = int(ranks), .tp = int(L.par.tp), .pp = int(p),
                              .dp = int(L.par.dp), .cp = int(L.par.cp)};
  std::vector<double> load(size_t(slots), 0.0);  // (slots): summed busy seconds per core
  for (int64_t r = 0; r < ranks; ++r) {
    const int64_t s = grid.coord_of(int(r)).pp;
    const bool end = p > 1 && (s == 0 || s == p - 1);
    load[size_t(r % slots)] += per_stage[size_t(s)].total() + b.optimizer + b.dp_exposed +
                               (end ? b.embedding_sync : 0.0);
  }
  return std::max(0.0, *std::max_element(load.begin(), load.end()) - b.step);
}

// AdamW and the gradient norm over what this rank owns: its dp shard from
// ZeRO-1 on (the norm: ZeRO-0 reads the whole reduced gradient).
void add_step_kernels(const SystemSpec& sys, const PlanLayout& L, int64_t params, Profile& ops) {
  const auto& par = L.par;
  const double shard = par.zero_stage >= 1 ? double(dp_cp(par)) : 1.0;
  // The engine's calls over the shard, at their costs (kernels/backend.h).
  const auto n = int64_t(double(params) / shard);
  for (auto [op, calls] : {std::pair{Op::Optimizer, kernels::Backend::adamw_update_cost(L.precision, n)},
                           std::pair{Op::GradNorm, kernels::Backend::sum_squares_cost(n)}})
    for (const kernels::KernelCall& c : calls)
      ops[op] += sys.kernel_seconds(c.kernel, double(c.elements), c.bytes_read + c.bytes_written);
  // FP8: the updated weights cast to FP8 and transposed once a step (read 2,
  // write 1 + 1 bytes a parameter), each rank over the weights it computes with.
  if (L.fp8 && !L.fp8_torchao)
    ops[Op::Cast] += 4.0 * double(params) / sys.achieved_memory_bandwidth();
  // Eager PyTorch's AdamW (layout.h), per fp32 parameter of the shard: m *=
  // b1 (read 4, write 4), m += (1 - b1) g (8 + 4), v *= b2 (8), v += (1 - b2)
  // g g (8 + 4), sqrt(v) (8), / sqrt(bias correction) (8), + eps (8), p +=
  // -step m / denom (12 + 4): 80 bytes where the fused kernel moves 28
  // (Composer 0.17 composer/optim/decoupled_weight_decay.py adamw(), with
  // weight_decay 0 as llm-foundry's MPT yamls; torch's _multi_tensor_adamw
  // has the same passes with lerp for the first two and a decay pass of 8
  // in place of none). And clip_grad_norm_'s grad *= min(1, max_norm / norm)
  // on every gradient (read 4, write 4) after the norm's read.
  if (L.eager_optimizer)
    ops[Op::Optimizer] += (80.0 - 28.0 + 8.0) * double(params) / shard / sys.achieved_memory_bandwidth();
  // Megatron-LM's fp16 loss scaling (layout.h), over the same shard: the
  // fp16 gradients copied into the fp32 main gradients (read 2, write 4
  // bytes) and unscaled with an inf/NaN check (read 4, write 4); then the
  // found-inf flag all-reduced over the model-parallel group, which costs
  // only latency (priced as tp's group, then pp's). The engine folds both
  // into its gradient norm (trainer.cpp): nothing more.
  if (!L.engine && L.precision == Precision::Fp16) {
    ops[Op::Optimizer] += 14.0 * double(params) / shard / sys.achieved_memory_bandwidth();
    ops[Op::Optimizer] +=
        collective_cost(sys, CommOp::AllReduce, 4, par.tp, 1, L.devices()).seconds +
        collective_cost(sys, CommOp::AllReduce, 4, par.pp, par.tp * par.dp, L.devices()).seconds;
  }
}

// Throughput and utilisation from the step time, and what the step is
// mostly made of besides compute.
void add_throughput(LayoutCost& c, const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  const auto& par = L.par;
  const StepBreakdown& b = c.time;
  const FlopCount fl = step_flops(m, par.global_batch, par.recompute, par.schedule);
  c.model_flops = fl.model;
  c.hardware_flops = fl.hardware;
  const double devices = double(L.devices());
  c.tokens_per_second = double(par.global_batch * m.seq_length) / b.step;
  c.tflops_per_device = fl.model / b.step / devices / 1e12;
  c.mfu = fl.model / (b.step * devices * sys.peak_flops(L.precision));
  c.hfu = fl.hardware / (b.step * devices * sys.peak_flops(L.precision));

  const std::pair<double, const char*> parts[] = {
      {b.bubble, "pipeline bubble"},       {b.tp_comm, "tensor-parallel communication"},
      {b.dp_exposed, "data-parallel reduction"}, {b.zero3_gather, "ZeRO-3 weight gathers"},
      {b.cp_comm, "context-parallel K/V exchange"},
      {b.optimizer, "optimizer step"},     {b.embedding_sync, "embedding sync"},
      {b.sync_wait, "waiting at synchronisations"}, {b.core_sharing, "ranks sharing cores"},
      {b.straggler, "the slowest device"}};
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
  // The engine keeps fp32 weights, gradients and AdamW state in every precision.
  const StateBytesPerParam per_param =
      L.engine ? engine_state_bytes_per_param(L.precision) : state_bytes_per_param(L.precision);
  const double layer_params = double(params.layer_params(t));

  // ---- memory per stage -------------------------------------------------
  stage_memory(c, m, L, params, opt, per_param, layer_params);
  check_fits(c, sys);

  // ---- time -------------------------------------------------------------
  // The engine's op list of one micro-batch (model/op_list.h), priced below.
  const OpList ol = op_list(op_list_config(m, L));
  const ChunkWork w = chunk_work(m, ol, sys, L, per_param, layer_params);
  const PipelineCosts pc = pipeline_costs(m, sys, L, w);
  const PipelineTime pt = opt.simulate_schedule && p > 1 ? pipeline_time_simulated(pc)
                                                         : pipeline_time_estimate(pc);
  StepBreakdown& b = c.time;
  b.simulated = pt.simulated;
  b.pipeline = pt.seconds;
  b.bubble = std::max(0.0, pt.seconds - pt.busiest);
  b.bubble_fraction = pt.bubble_fraction;
  b.p2p = pc.p2p_seconds;

  std::vector<Profile> per_stage;  // (pp): each stage's work before the step-level kernels
  for (int64_t s = 0; s < p; ++s) per_stage.push_back(stage_ops(w, L, s));
  const int64_t bs = busiest_stage(per_stage);
  const Profile& busiest = per_stage[size_t(bs)];
  // (Only ZeRO-3 gathers: without it the difference is rounding of the
  // other collectives in Op::Comm, the cp exchange's included.)
  b.zero3_gather = par.zero_stage == 3 ? double(mb * v) * w.zero3_exposed(bs) : 0.0;
  b.cp_comm = double(mb * v * w.chunk_layers[size_t(bs)]) * w.layer_cp_comm;
  b.tp_comm = busiest[Op::Comm] - b.zero3_gather - b.cp_comm;
  b.compute = busiest.total() - busiest[Op::Comm];

  int64_t max_params = 0;
  for (const auto& s : c.stages) max_params = std::max(max_params, s.params);
  step_comm(b, m, sys, L, opt, per_param, max_params, pc);
  Profile largest;
  add_step_kernels(sys, L, max_params, largest);
  b.optimizer = largest.total();  // AdamW, the norm (and FP8's weight casts)
  // Ranks that synchronise wait for the late one at every collective.
  b.sync_wait =
      sys.sync_wait * syncs_per_step(ol, L, w.chunk_layers[size_t(bs)], !m.untie_embeddings);
  b.step = b.pipeline + b.dp_exposed + b.embedding_sync + b.optimizer + b.sync_wait;
  // The slowest device paces the step's tensor-core work (GEMMs and
  // attention, what the cited spread was measured on: matmul throughput,
  // set by each GPU's clock under its power and cooling): the busiest
  // rank's, stretched by the pipeline's idle time, which waits on it too.
  const double busy = busiest.total();
  const double tensor_core = busiest[Op::Gemm] + busiest[Op::Attention];
  b.straggler = straggler_seconds(sys, L.devices(), busy > 0 ? tensor_core * b.pipeline / busy : 0.0);
  b.step += b.straggler;
  b.core_sharing = core_sharing(sys, L, per_stage, b);
  b.step += b.core_sharing;
  for (auto& sc : c.stages) {
    sc.ops = per_stage[size_t(sc.stage)];
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
