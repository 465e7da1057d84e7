// Memory per pipeline stage: model state (weights, gradients, optimizer)
// per ZeRO stage and precision, and activations per recompute mode.
#pragma once
#include <cstdint>

#include "tessera/model/activations.h"
#include "tessera/config/gpt_config.h"
#include "tessera/parallel/memory_bytes.h"
#include "tessera/plan/layout.h"

namespace tessera::plan {

// Bytes per parameter of each kind of model state, before ZeRO sharding,
// as Megatron-LM holds it. fp16 (Rajbhandari et al. 2020, ZeRO §3.1): 2
// (fp16 weights) + 2 (fp16 grads) + K = 12 (fp32 master weights, Adam m
// and v). bf16: the same with fp32 gradients, 2 + 4 + 12 (Megatron
// accumulates and all-reduces bf16 runs' gradients in fp32; layout.h).
// fp32: the engine's kFp32AdamBytes, 4 + 4 + 8. The sharding itself is
// zero_state_bytes (parallel/memory_bytes.h), the engine's formula.
StateBytesPerParam state_bytes_per_param(Precision p);
// What `tessera train` itself holds per parameter in a precision: fp32 the
// same as above; bf16 and fp16 (--bf16 / --fp16) the engine's recipe,
// kMixed16AdamBytes (fp32 master weights kept beside the 16-bit copy, fp32
// gradients): 18 bytes. The engine's DataParallel::memory() equals
// zero_state_bytes of this exactly (tests/mpi/mpi_test_trainer.cpp).
StateBytesPerParam engine_state_bytes_per_param(Precision p);

// Activation bytes one transformer layer keeps for one micro-batch on one
// tensor-parallel rank, for 16-bit activations (Korthikanti et al. 2022,
// "Reducing Activation Recomputation in Large Transformer Models", §4):
//   no parallelism            sbh (34 + 5as/h)
//   tensor parallel           sbh (10 + 24/t + 5as/(ht))        (eq. 2)
//   tensor + sequence par.    sbh/t (34 + 5as/h)                (eq. 3)
//   selective recompute       drops the 5as/h term (attention core recomputed)
//   full recompute            2sbh (the layer input only; /t with SP)
// Flash attention never stores the s x s score matrices: the 5as/h term goes.
// The Llama family (memory_model.cpp): q, k, v take 2 qkv_width / h of the
// 24 (GQA's fewer k / v heads), SwiGLU's MLP 6 F / h instead of 4 F / h, and
// the two dropout masks (2 of the 10) only with dropout on.
// fp8: Transformer Engine's FP8 linears keep their inputs in FP8 (1 byte).
// gpt_without_dropout: a GPT that trained without dropout stores no masks
// either (PlanLayout::gpt_without_dropout).
double korthikanti_layer_bytes(const GPTConfig& m, int64_t micro_batch, int64_t tp,
                               bool sequence_parallel, Recompute recompute, bool flash_attention,
                               bool fp8 = false, bool gpt_without_dropout = false);
// Whether a layer stores dropout masks: a GPT unless it trained without
// dropout, the Llama family only with its config's dropout.
bool stores_dropout_masks(const GPTConfig& m, bool gpt_without_dropout);

// The engine's activation shape of one micro-batch on tp rank 0 of a stage
// holding `layers` layers: what GPT::act_shape / stage_act_shape build
// (recompute, sequence parallelism and precision included: --bf16 and
// --fp16 GEMM activations take 2 bytes), so activations_bytes() of it is exactly what `tessera train`
// allocates per micro-batch slot.
ActShape engine_shape(const GPTConfig& m, int64_t micro_batch, int64_t tp, int64_t layers,
                      bool has_head, bool sequence_parallel, Recompute recompute,
                      Precision precision = Precision::Fp32);

// Micro-batch chunks whose activations pipeline rank `stage` holds at its
// peak, for a schedule (one chunk = layers / (p v) layers). Closed forms of
// what peak_in_flight() counts on build_schedule()'s lists (the tests check
// they agree): GPipe m·v; 1F1B min(m, p - stage); interleaved, Megatron's
// warm-up count plus one: min(m v, 2 (p - stage - 1) + (v - 1) p + 1);
// ZB-H1 min(m, p) (activations live until the deferred weight pass); ZBV
// has no closed form: its lists' own peak (at most 2 min(m, p) half-size
// chunks), computed once per (p, m).
int64_t in_flight_chunks(ScheduleKind kind, int64_t p, int64_t v, int64_t m, int64_t stage);

}  // namespace tessera::plan
