// The kernel backend seam: every kernel the engine runs on a buffer, as
// one abstract interface. The kernels are declared once, in
// backend_methods.inc, with their shapes, element types and costs; this
// class, the CPU backend (kernels/cpu/cpu_backend.h over the kernels of
// kernels/cpu/, the reference) and the tracing backend (trace_backend.h)
// are generated from that list. A GPU backend is another class that
// implements this one, and the model, the optimizer and the data-parallel
// engine do not change.
//
// The engine does not call a Backend directly: it calls kernels::Ops
// (ops.h), which picks the views' precisions, casts GEMM operands under
// --bf16 / --fp16 and charges each call's time to the step's profile.
//
// Conventions. Row-major buffers; the shape of each is in the comment of
// its method. A buffer whose element type can vary is a dtype-tagged view
// (Act, ConstAct: precision.h), and the backend dispatches on the tags; a
// combination it has no kernel for is a tessera::Error. A plain float* is
// always fp32 (statistics, gradients, the residual stream, optimizer state,
// the loss). Every method's arguments say the shapes and element types of
// all its buffers, so its cost (elements, bytes, FLOPs) follows from them
// without reading any buffer (the one exception, embedding rows outside
// [vocab_begin, vocab_end), is a skipped copy, not extra work).
//
// Costs. Each entry of the list states its cost from the shapes and types:
// the calls it amounts to (a fused kernel as its parts), each with the
// elements it is applied to, the bytes it reads and writes and the FLOPs
// of its matmuls. The tracing backend records them, which is how the
// planner learns what the engine runs (model/op_trace.h); they are the CPU
// kernels' figures.
#pragma once
#include <cstdint>
#include <string_view>

#include "tessera/kernels/adamw_args.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/kernels/dropout_site.h"
#include "tessera/kernels/kernel_call.h"
#include "tessera/kernels/precision.h"

namespace tessera::kernels {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // The kernels, each a pure virtual method: backend_methods.inc lists
  // them with their shapes, types and costs.
#define TESSERA_BACKEND_METHOD(Ret, name, params, args, key, ...) virtual Ret name params const = 0;
#include "tessera/kernels/backend_methods.inc"
#undef TESSERA_BACKEND_METHOD

  // The costs the list's entries name (backend.cpp), from the shapes and
  // element types alone; the planner calls some of them directly (the
  // optimizer's, attention's).
  static KernelCalls matmul_forward_cost(Precision in, Precision out, bool bias, int64_t N,
                                         int64_t C, int64_t OC);
  static KernelCalls matmul_backward_cost(Precision in, bool dinp, bool dweight, bool dbias,
                                          int64_t N, int64_t C, int64_t OC);
  static KernelCalls cast_cost(Precision out, Precision in, int64_t n);
  static KernelCalls grouped_matmul_forward_cost(Precision in, Precision out, bool bias,
                                                 int64_t R, int64_t E, int64_t C, int64_t OC);
  static KernelCalls grouped_matmul_backward_cost(Precision in, bool dinp, bool dweight,
                                                  bool dbias, int64_t R, int64_t E, int64_t C,
                                                  int64_t OC);
  static KernelCalls moe_route_forward_cost(int64_t N, int64_t E, int64_t K);
  static KernelCalls moe_route_backward_cost(int64_t N, int64_t E, int64_t K);
  static KernelCalls moe_permute_cost(Precision x, int64_t N, int64_t K, int64_t C);
  static KernelCalls moe_combine_cost(int64_t N, int64_t K, int64_t C);
  static KernelCalls moe_shared_gate_cost(int64_t N, int64_t C);
  static KernelCalls fill_cost(Precision x, int64_t n);
  static KernelCalls accumulate_cost(Precision x, int64_t n);
  static KernelCalls bias_add_cost(bool gelu, int64_t N, int64_t C);
  static KernelCalls layernorm_forward_cost(Precision out, bool res, int64_t N, int64_t C);
  static KernelCalls layernorm_backward_cost(int64_t N, int64_t C);
  static KernelCalls rmsnorm_forward_cost(Precision out, int64_t N, int64_t C);
  static KernelCalls rmsnorm_backward_cost(int64_t N, int64_t C);
  static KernelCalls attention_forward_cost(Precision dtype, int64_t B, int64_t T,
                                            const AttentionHeads& heads, const DropoutSite* drop);
  static KernelCalls attention_backward_cost(Precision dtype, int64_t B, int64_t T,
                                             const AttentionHeads& heads,
                                             const DropoutSite* drop);
  static KernelCalls attention_decode_cost(int64_t len, const AttentionHeads& heads);
  static KernelCalls ring_kv_pack_cost(int64_t B, int64_t T, const AttentionHeads& heads);
  static KernelCalls ring_attention_block_cost(bool forward, int64_t B, int64_t Tq, int64_t Tk,
                                               const AttentionHeads& heads,
                                               const DropoutSite* drop);
  static KernelCalls ring_qkv_grad_cost(Precision dqkv, int64_t B, int64_t T,
                                        const AttentionHeads& heads);
  static KernelCalls ring_attention_backward_init_cost(int64_t B, int64_t Tq,
                                                       const AttentionHeads& heads);
  static KernelCalls rope_rows_cost(int64_t rows, int64_t heads, int64_t HS);
  static KernelCalls gelu_forward_cost(Precision dtype, int64_t n);
  static KernelCalls gelu_backward_cost(Precision dtype, int64_t n);
  static KernelCalls swiglu_forward_cost(Precision dtype, int64_t N, int64_t F);
  static KernelCalls swiglu_backward_cost(Precision dtype, int64_t N, int64_t F);
  static KernelCalls dropout_rows_cost(int64_t rows, int64_t C);
  static KernelCalls token_embedding_forward_cost(int64_t N, int64_t C);
  static KernelCalls token_embedding_backward_cost(int64_t N, int64_t C);
  static KernelCalls position_embedding_forward_cost(int64_t B, int64_t T, int64_t C);
  static KernelCalls position_embedding_backward_cost(int64_t B, int64_t T, int64_t C);
  static KernelCalls cross_entropy_forward_cost(int64_t N, int64_t V);
  static KernelCalls cross_entropy_backward_cost(Precision dlogits, int64_t N, int64_t V);
  static KernelCalls vp_xent_local_max_cost(int64_t N, int64_t V);
  static KernelCalls vp_xent_local_sums_cost(int64_t N, int64_t V);
  static KernelCalls vp_xent_finish_cost(int64_t N);
  static KernelCalls adamw_update_cost(Precision working, int64_t n);
  static KernelCalls sum_squares_cost(int64_t n);

  // Whether some method's cost reports calls named `kernel` ("gelu_forward",
  // "matmul_backward.dbias"): the names a calibrated system file prices.
  static bool reports_call(std::string_view kernel);
};

}  // namespace tessera::kernels
