#include "tessera/plan/layer_ops.h"

#include <algorithm>
#include <string_view>

#include "tessera/plan/causal_attention.h"
#include "tessera/plan/comm_model.h"
#include "tessera/plan/context_parallel_cost.h"
#include "tessera/plan/eager_kernels.h"
#include "tessera/plan/gemm_model.h"

namespace tessera::plan {

namespace {

// Megatron-LM in 16 bits (a layout not marked `engine`) keeps the residual
// stream, the LayerNorm inputs and outputs and their gradients in the
// 16-bit type, where the engine keeps them in fp32 (model/activations.h):
// a kernel the list prices in fp32 alone (dtype fp32: LayerNorm, residual
// adds, hidden dropout, biases, embedding) moves half the bytes there, and
// the engine's casts between the two do not exist. A kernel with a 16-bit
// view already (GELU, softmax) keeps its bytes (its fp32 gradient part
// makes that a little high); the loss stays fp32, as Megatron upcasts the
// logits unless --fp16-lm-cross-entropy.
double megatron16_bytes_factor(const OpEntry& e, const PlanLayout& L) {
  if (L.engine || L.precision == Precision::Fp32) return 1.0;
  if (e.op == Op::Cast) return 0.0;
  if (e.op == Op::Loss || e.dtype != Precision::Fp32) return 1.0;
  return 0.5;
}

double memory_seconds(const OpEntry& e, const SystemSpec& sys, const PlanLayout& L) {
  if (e.elements <= 0 && e.memory_bytes() <= 0) return 0;
  // Eager PyTorch runs this kernel as several (eager_kernels.h).
  if (L.eager_elementwise)
    if (const double b = eager_bytes_per_element(e.kernel); b > 0)
      return b * double(e.elements) / sys.achieved_memory_bandwidth();
  const double factor = megatron16_bytes_factor(e, L);
  if (factor == 0) return 0;  // a cast Megatron-LM does not make
  // Its own kernel's [kernels] rate, else its bytes at [device] memory_efficiency.
  return sys.kernel_seconds(e.kernel, double(e.elements), factor * e.memory_bytes());
}

// A transformer layer's linear GEMM under --precision fp8 (Transformer
// Engine): the GEMM on FP8 operands, and the memory-bound pass that casts
// its activation operand (X in forward, dY for the input gradient) to FP8
// with its amax and writes it transposed too, for the weight gradient:
// read 2 bytes, write 1 + 1 per element, m x k elements. The weight
// gradient reuses both transposes. Batched GEMMs (attention's) stay 16-bit.
double fp8_linear_seconds(const OpEntry& e, const SystemSpec& sys) {
  const std::string_view k = e.kernel;
  const bool cast = k == "matmul_forward" || k == "matmul_backward.dinp";
  const GemmShape shape = k == "matmul_backward.dweight" ? GemmShape{e.n, e.m, e.k, e.batch}
                                                          : GemmShape{e.m, e.n, e.k, e.batch};
  const double cast_bytes = cast ? 4.0 * double(e.m) * double(e.k) * double(e.batch) : 0.0;
  return gemm_seconds_fp8(sys, shape) + cast_bytes / sys.achieved_memory_bandwidth();
}

bool fp8_linear(const OpEntry& e) {
  const std::string_view k = e.kernel;
  return e.cls == OpClass::Gemm && k.starts_with("matmul_") && !k.starts_with("matmul_forward.") &&
         !k.starts_with("matmul_backward.dbias");
}

double entry_seconds(const OpEntry& e, const SystemSpec& sys, const PlanLayout& L, bool fp8) {
  if (!fp8 || !fp8_linear(e)) return op_seconds(e, sys, L);
  // torchao's Float8Linear casts its (16-bit) weight to FP8 each time it
  // runs forward (PlanLayout::fp8_torchao): read 2, write 1 bytes a weight.
  const double weight_cast = L.fp8_torchao && std::string_view(e.kernel) == "matmul_forward"
                                 ? 3.0 * double(e.n) * double(e.k) / sys.achieved_memory_bandwidth()
                                 : 0.0;
  return fp8_linear_seconds(e, sys) + weight_cast;
}

// --tp-comm-overlap: the GEMM that list[i], a tensor-parallel collective of
// activations, runs beside in Transformer Engine's userbuffers overlap, or
// none. An all-gather feeds the GEMM after it (a forward GEMM, or the input
// gradient's in backward); a reduce-scatter drains the GEMM before it (the
// forward GEMM that produced its partial sums; in backward the weight
// gradient, which runs while the input gradient is reduce-scattered). Only
// the adjacent GEMM of the same phase: another collective or the attention
// in between means nothing to hide behind.
const OpEntry* overlap_partner(const std::vector<OpEntry>& list, size_t i) {
  const OpEntry& c = list[i];
  // Memory-bound entries (a bias) between the two are walked over.
  auto stop = [&](const OpEntry& e) {
    return e.phase != c.phase || e.cls == OpClass::Collective || e.cls == OpClass::Attention;
  };
  if (c.collective == CommOp::AllGather) {
    for (size_t j = i + 1; j < list.size() && !stop(list[j]); ++j)
      if (list[j].cls == OpClass::Gemm) return &list[j];
  } else {
    for (size_t j = i; j-- > 0 && !stop(list[j]);)
      if (list[j].cls == OpClass::Gemm) return &list[j];
  }
  return nullptr;
}

// The seconds a collective of `comm` seconds still waits for when it is cut
// into tp chunks that move while a GEMM of `gemm` seconds computes on the
// chunk already there: the GEMM's first (all-gather) or last (reduce-scatter)
// chunk runs alone, the other tp - 1 chunks of the GEMM cover the
// transfers. The GEMM's chunks are priced as the whole GEMM (their smaller
// tiles' wave losses and the SMs the transfers use are not counted).
double tp_overlapped_seconds(double comm, double gemm, int64_t tp) {
  return std::max(0.0, comm - gemm * double(tp - 1) / double(tp));
}

// Sums the entries of `phase` in `list` into `p` by profile kind. `fp8`:
// the list's linear GEMMs run in FP8 (a transformer layer's, --precision fp8).
// `only`: the entries to price (all of the phase's when null).
void price(Profile& p, const std::vector<OpEntry>& list, OpPhase phase, const SystemSpec& sys,
           const PlanLayout& L, bool fp8 = false, bool (*only)(const OpEntry&) = nullptr) {
  for (size_t i = 0; i < list.size(); ++i) {
    const OpEntry& e = list[i];
    if (e.phase != phase || (only != nullptr && !only(e))) continue;
    double seconds = entry_seconds(e, sys, L, fp8);
    const bool overlapped = L.tp_comm_overlap && e.cls == OpClass::Collective && e.activation &&
                            e.collective != CommOp::AllReduce && e.group_size > 1;
    if (overlapped)
      if (const OpEntry* g = overlap_partner(list, i))
        seconds = tp_overlapped_seconds(seconds, entry_seconds(*g, sys, L, fp8), e.group_size);
    p[e.op] += seconds;
  }
}

// The weight pass's calls among a layer's backward entries: each GEMM's
// weight gradient and its bias sum (Backend::matmul_backward_cost's parts).
bool weight_pass_entry(const OpEntry& e) {
  const std::string_view k = e.kernel;
  return k == "matmul_backward.dweight" || k == "matmul_backward.dbias";
}
// Under sequence parallelism the forward's all-gathers of ln_1 and ln_2
// (tp_enter_forward), which the weight pass makes again for its GEMM inputs.
bool forward_all_gather(const OpEntry& e) {
  return e.cls == OpClass::Collective && e.collective == CommOp::AllGather;
}

}  // namespace

OpListConfig op_list_config(const GPTConfig& m, const PlanLayout& L) {
  OpListConfig c;
  // Context parallelism: each rank's op list is its T / cp tokens'
  // (attention rescaled in layer_ops: context_parallel_cost.h).
  c.model = cp_local_model(m, L.par.cp);
  c.micro_batch = L.par.micro_batch;
  c.tp = L.par.tp;
  c.sequence_parallel = L.par.sequence_parallel;
  c.recompute = L.par.recompute;
  c.precision = L.precision;
  c.training = true;
  c.flash_attention = L.flash_attention;
  return c;
}

double op_seconds(const OpEntry& e, const SystemSpec& sys, const PlanLayout& L) {
  switch (e.cls) {
    case OpClass::Gemm:
      // A weight gradient dW (out, in) is the sgemm out x in x rows, which
      // `tessera calibrate` records under the planner's name (in, out, rows)
      // (calibrate_compute.cpp): look it up under that name.
      if (std::string_view(e.kernel) == "matmul_backward.dweight")
        return gemm_seconds(sys, L.precision, {e.n, e.m, e.k, e.batch});
      return gemm_seconds(sys, L.precision, {e.m, e.n, e.k, e.batch});
    case OpClass::Attention:
      // The fused kernel's matmuls at the system's attention efficiency (at
      // the clock the device sustains: SystemSpec::sustained_clock), and
      // its dropout mask where this machine's draw was measured (a datasheet
      // system has no such figure: its mask stays unpriced).
      // A causal pass on a tile-skipping flash kernel computes only the
      // tiles on and below the diagonal (causal_attention.h); the unfused
      // attention computes the whole matrix. e.n is the rank's T / cp
      // queries; the mask spans the whole sequence. The backward kernel
      // runs at its own rate where the system file measures one
      // (SystemSpec::attention_backward_rate); a recompute reruns the forward.
      {
        const double efficiency =
            (e.phase == OpPhase::Backward ? sys.attention_backward_rate() : sys.attention_efficiency) *
            (L.triton_attention ? sys.triton_attention_factor(e.phase == OpPhase::Backward) : 1.0);
        return e.flops *
                   (L.flash_attention ? causal_attention_fraction(e.n * L.par.cp, sys.attention_causal_speedup)
                                      : 1.0) /
                   (sys.sustained_peak_flops(L.precision) * sys.gemm_max_efficiency * efficiency) +
               kernel_rate(sys.kernel_rates, kAttentionMaskDraw) * double(e.mask_draws);
      }
    case OpClass::Memory: return memory_seconds(e, sys, L);
    case OpClass::Collective: {
      // The engine sends activations and their gradients in fp32 (its
      // gathered 16-bit LayerNorm outputs aside); Megatron-LM on GPUs (a
      // layout not marked `engine`) sends them in the 16-bit type.
      const bool megatron16 = !L.engine && L.precision != Precision::Fp32 && e.activation;
      const double bytes = megatron16 ? 2.0 * double(e.elements) : e.bytes;
      return collective_cost(sys, e.collective, bytes, e.group_size, 1, L.devices())
          .seconds;
    }
  }
  return 0;
}

LayerOps layer_ops(const OpList& ol, const SystemSpec& sys, const PlanLayout& L) {
  LayerOps r;
  price(r.forward, ol.layer, OpPhase::Forward, sys, L, L.fp8);
  price(r.recompute, ol.layer, OpPhase::Recompute, sys, L, L.fp8);
  price(r.backward, ol.layer, OpPhase::Backward, sys, L, L.fp8);
  price(r.weight, ol.layer, OpPhase::Backward, sys, L, L.fp8, weight_pass_entry);
  if (L.par.sequence_parallel)
    price(r.weight, ol.layer, OpPhase::Forward, sys, L, L.fp8, forward_all_gather);
  // A cp rank's queries meet the whole causal sequence's keys: cp times the
  // T / cp list's attention (context_parallel_cost.h).
  for (Profile* p : {&r.forward, &r.recompute, &r.backward}) scale_cp_attention(*p, L.par.cp);
  return r;
}

EndOps end_ops(const OpList& ol, const SystemSpec& sys, const PlanLayout& L) {
  EndOps e;
  price(e.embed_forward, ol.embed, OpPhase::Forward, sys, L);
  price(e.embed_backward, ol.embed, OpPhase::Backward, sys, L);
  price(e.head_forward, ol.head, OpPhase::Forward, sys, L);
  price(e.head_backward, ol.head, OpPhase::Backward, sys, L);
  return e;
}

LayerOps layer_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  return layer_ops(op_list(op_list_config(m, L)), sys, L);
}

EndOps end_ops(const GPTConfig& m, const SystemSpec& sys, const PlanLayout& L) {
  return end_ops(op_list(op_list_config(m, L)), sys, L);
}

// Blocking synchronisations of one step on the busiest rank (the last
// stage): every collective or receive at which a rank waits for the others.
// Each costs the system's sync_wait: noise makes some rank late at every
// one, however little data it carries. The tensor-parallel ones are the op
// list's collectives; the data-parallel and pipeline ones are the step's
// (data_parallel.cpp, the pipeline executor).
double syncs_per_step(const OpList& ol, const PlanLayout& L, int64_t layers_per_chunk,
                      bool tied_embeddings) {
  const auto& par = L.par;
  const double mb_chunks = double(L.micro_batches() * par.virtual_stages);
  double n = 0;
  if (par.tp > 1) {
    auto collectives = [](const std::vector<OpEntry>& list) {
      double c = 0;
      for (const OpEntry& e : list) c += e.cls == OpClass::Collective;
      return c;
    };
    double ends = collectives(ol.head);
    // Without a pipeline the same rank embeds.
    if (par.pp == 1) ends += collectives(ol.embed);
    // + 1: the gradient norm's sum over tp.
    n += mb_chunks * double(layers_per_chunk) * collectives(ol.layer) +
         double(L.micro_batches()) * ends + 1;
  }
  // Context parallelism: each ring step (or the gather) of each layer, both ways.
  if (par.cp > 1)
    n += mb_chunks * double(layers_per_chunk) *
         (par.cp_comm == CpCommType::AllGather ? 3.0 : 2.0 * double(par.cp - 1));
  if (dp_cp(par) > 1) {
    n += 2;  // the gradient reduction's wait, the loss's all-reduce
    if (par.zero_stage >= 1) n += 1;  // the gradient norm over shards
    if (par.zero_stage == 1 || par.zero_stage == 2) n += 1;  // the weights' all-gather
    // Gathers per use: forward and backward, and under zb-h1 / zbv the weight pass.
    if (par.zero_stage == 3)
      n += mb_chunks * double(layers_per_chunk) * (par.split_backward() ? 3 : 2);
  }
  // Receives; the loss broadcast, the tied embedding's sum (none untied), the norm.
  if (par.pp > 1) n += 2 * mb_chunks + 2 + (tied_embeddings ? 1 : 0);
  return n;
}

}  // namespace tessera::plan
