// The op list: what one transformer layer and the model's two ends do per
// micro-batch on one tensor-parallel rank, kernel call by kernel call. It
// is recorded, not written: op_trace.h runs the engine's own block.cpp and
// gpt.cpp on a backend that writes each call down with the cost its
// declaration states (kernels/backend.h, comm/comm_op.h), so a kernel added
// to the engine is in the list by itself. The planner prices it
// (plan/layer_ops.cpp); tests/model/test_op_trace.cpp and
// tests/mpi/mpi_test_op_trace.cpp check that a real run executes exactly
// the traced calls.
//
// Per entry: the phase (forward, the recomputation backward runs first,
// backward), the profile kind kernels::Ops charges it to (core/profile.h), and
//   GEMM        C (m x n) = A (m x k) B (k x n), `batch` copies, operands in
//               `dtype` (fp32, or bf16 / fp16 with fp32 accumulation);
//               matmul_backward is two GEMMs (dinp, dweight) and, with a
//               bias, a column sum of dY (a memory-bound entry); an fp32
//               matmul_forward with a bias adds it in a pass of its own
//               ("matmul_forward.bias"; the 16-bit GEMMs fuse it);
//   attention   the fused (flash-style) kernel: shape (B, T, Cl, NH) in
//               (m, n, k, batch), its matmul FLOPs, the bytes it moves;
//   memory      a memory-bound kernel: elements it is applied to (the unit
//               of the planner's calibrated [kernels] tables), bytes read
//               and written;
//   collective  kind, group (always tp here) and data size S in bytes
//               (comm_op.h's convention: the buffer for all-reduce, the
//               full input for reduce-scatter, the full output for all-gather).
// `kernel` names the Backend method (a fused kernel appears as its parts:
// "matmul_backward.dinp", the "add" of a norm that takes the residual in,
// ...; a cast between equal types is a "copy"), or the collective
// ("all_reduce", ...). `what` names the parameter the call reads, as the
// layout names it without layer or kind ("attn.qkv", "mlp.proj", "ln_1",
// "wte", ...), empty for a call that reads none.
//
// Flash or not: the engine's attention is flash-style (no T x T scores in
// memory). flash_attention = false lists Megatron's unfused attention
// instead (two batched GEMMs, softmax, dropout of the probabilities): the
// planner prices GPU runs that store the scores; the engine never runs it.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/config/gpt_config.h"
#include "tessera/comm/comm_op.h"
#include "tessera/config/parallel_config.h"
#include "tessera/core/profile.h"
#include "tessera/kernels/kernel_call.h"
#include "tessera/kernels/precision.h"

namespace tessera {

enum class OpPhase { Forward, Recompute, Backward };
enum class OpClass { Gemm, Attention, Memory, Collective };
const char* op_phase_name(OpPhase p);

struct OpEntry {
  OpPhase phase = OpPhase::Forward;
  OpClass cls = OpClass::Memory;
  Op op = Op::Gemm;              // the profile kind the engine charges it to
  const char* what = "";         // the parameter it reads, for reports: "attn.qkv", "ln_1", "wte", ...
  const char* kernel = "";       // the Backend method (see above)
  // GEMM operands; a memory kernel's 16-bit view, if any; a collective's payload
  Precision dtype = Precision::Fp32;
  int64_t m = 0, n = 0, k = 0, batch = 1;  // GEMM; attention: B, T, Cl, NH
  int64_t elements = 0;          // memory: elements applied to; attention: B*T*Cl; collective: payload
  double bytes_read = 0, bytes_written = 0;  // device memory traffic
  double flops = 0;              // GEMM 2 m n k batch; attention its matmuls' FLOPs
  int64_t mask_draws = 0;        // attention: Philox draws of its probability-dropout mask
  comm::CommOp collective = comm::CommOp::AllReduce;  // the tp group's: all_reduce, all_gather or reduce_scatter
  int64_t group_size = 1;        // collective: ranks in the (tp) group
  double bytes = 0;              // collective: data size S
  // collective: it moves (N, C) activations or their gradients (not the
  // loss statistics or LayerNorm gradients). The engine sends those in fp32
  // except the gathered 16-bit LayerNorm outputs (dtype); Megatron-LM sends
  // them all in the 16-bit type, which the planner prices for GPU runs.
  bool activation = false;

  double memory_bytes() const { return bytes_read + bytes_written; }
};

// A traced kernel call as an entry: its class, kernel, dtype, shape and
// costs. Phase, profile kind and `what` are the recorder's to fill; the
// trace (op_trace.cpp) and the tests' record of a real run
// (tests/common/op_recorder.h) both map calls through here.
OpEntry op_entry_of(const kernels::KernelCall& k);

struct OpListConfig {
  GPTConfig model;               // its dropout probabilities apply when `training`
  int64_t micro_batch = 1;       // sequences per micro-batch (B); T = model.seq_length
  int64_t tp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
  Precision precision = Precision::Fp32;  // --bf16 / --fp16: 16-bit GEMMs and their activations
  bool training = true;          // false: no dropout runs (evaluation)
  bool flash_attention = true;   // false: Megatron's unfused attention (planner only)
};

// One micro-batch on tp rank 0 (the rank with the most real vocabulary
// columns), in the order the engine runs it: forward entries, then the
// recomputation and backward entries (backward runs each layer's
// recomputation just before its backward). `what` points at storage that
// lives as long as the program (the labels are interned).
struct OpList {
  std::vector<OpEntry> layer;  // one transformer layer (block.cpp)
  std::vector<OpEntry> embed;  // first stage: token + position embedding, its dropout
  std::vector<OpEntry> head;   // last stage: final LayerNorm, tied LM head, loss
};

// Throws tessera::Error for a shape the engine rejects (heads, hidden or
// ffn not divisible by tp; SP with T not divisible by tp).
OpList op_list(const OpListConfig& c);

}  // namespace tessera
