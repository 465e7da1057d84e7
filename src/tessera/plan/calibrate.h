// Calibration: measure this machine with the engine's own kernels and write
// it as a planner system file (`tessera calibrate` -> configs/systems/local.toml).
//
// What the planner's cost model reads, and how each is measured:
//   [[gemm.measured]]   oneDNN sgemm on the shapes a training step calls (the
//                       GEMMs of the model's traced op list, model/op_list.h:
//                       every linear's forward, input and weight gradient, and
//                       the LM head's), in the planner's (m, n, k)
//                       convention so `gemm_seconds` finds them exactly
//   memory bandwidth    a STREAM triad over arrays far larger than the caches
//   attention           the backend's flash-style kernel, forward + backward,
//                       as an efficiency relative to the best GEMM
//   [kernels]           every memory-bound call of a training step (norms,
//                       activations, residual adds, biases, embedding, loss,
//                       dropout, casts, ...), AdamW and the gradient norm:
//                       seconds per element, timed call by call through the
//                       backend where the step runs them (kernel_rates.h)
//   network             ping-pong between ranks 0 and 1 (only with >= 2 ranks)
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/profile.h"
#include "tessera/config/gpt_config.h"
#include "tessera/kernels/attention_heads.h"
#include "tessera/plan/kernel_rates.h"
#include "tessera/plan/system.h"

namespace tessera::comm {
class Communicator;
}
namespace tessera::kernels {
class Backend;
}

namespace tessera::plan {

// A GEMM as the planner names it (C = A B, A m x k, B k x n) and how the
// engine calls it (sgemm transposes and argument order), so that what is
// measured is what a training step runs.
struct CalibShape {
  int64_t m = 0, n = 0, k = 0;   // planner convention (gemm_model.h)
  char ta = 'N', tb = 'N';       // sgemm call: M x N x K below
  int64_t M = 0, N = 0, K = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// Every distinct GEMM of one training micro-batch of `model` at this
// micro-batch and tp degree, as the engine's traced op list has them
// (model/op_list.h), at the model's own widths (GQA's qkv, SwiGLU's
// [gate | up]): forward (NT), input gradient (NN) and weight gradient (TN)
// of each linear, the linears in the order forward runs them (the layer's,
// then the LM head).
std::vector<CalibShape> training_gemm_shapes(const GPTConfig& model, int64_t micro_batch,
                                             int64_t tp);

// The median calibration takes of its repeats and passes: the middle
// element (of two middles, the later), so it is always a value measured.
double upper_median(std::vector<double> values);
// The same kind by kind over profiles.
Profile upper_median(const std::vector<Profile>& profiles);

// Achieved FLOP/s of one shape on `backend` in precision `p` (the GEMM of
// a linear in the role the shape's transposes name: kernels/gemm_peak.h),
// the median of repeats, at least `min_seconds` timed. Throws for a pair of
// transposes no linear calls.
double measure_gemm(const kernels::Backend& backend, Precision p, const CalibShape& s,
                    double min_seconds);
// STREAM triad a = b + q c, bytes/s (3 arrays of `elements` floats, 12 bytes each).
double measure_triad_bandwidth(int64_t elements);
// Seconds of the attention forward and backward of `backend` for one
// micro-batch of B sequences of T tokens in `heads` (GQA, RoPE: the model's own).
struct AttentionTime {
  double forward = 0, backward = 0;
  double planner_flops = 0;  // the planner's forward count: 4 b s^2 h (layout_cost.cpp)
  int64_t batch = 0, seq = 0, hidden = 0, heads = 0;
};
AttentionTime measure_attention(const kernels::Backend& backend, int64_t batch, int64_t seq,
                                const AttentionHeads& heads);
// Seconds per Philox draw of the probability-dropout mask inside the same
// kernels: what the mask adds to their forward and backward, over its draws.
double measure_attention_mask(const kernels::Backend& backend, int64_t batch, int64_t seq,
                              const AttentionHeads& heads, double min_seconds);

// One training micro-batch of `model` through the engine itself (GPT
// forward + backward on this rank, no parallelism, random tokens, dropout
// as the model sets it) in `precision`, timed by the engine's profile: the
// kernels one after the other on activations far larger than the caches, as
// in training. Median per kind of work of `reps`.
Profile measure_training_step(const GPTConfig& model, int64_t micro_batch, int reps,
                              Precision precision = Precision::Fp32);
// The same, every one of the `reps` timed runs (after the warm-up).
std::vector<Profile> measure_training_steps(const GPTConfig& model, int64_t micro_batch, int reps,
                                            Precision precision = Precision::Fp32);

// measured / predicted for each kind of compute work of that step, the
// prediction from `tables` (a calibration's system without in-situ factors)
// for the same precision: the system file's [in_situ] factors.
Profile in_situ_factors(const Profile& measured, const SystemSpec& tables, const GPTConfig& model,
                        int64_t micro_batch, Precision precision = Precision::Fp32);

// Ping-pong between group ranks 0 and 1 (others wait): one-way latency of a
// small message and bandwidth of a large one. Collective over `comm`.
struct NetworkMeasure {
  double latency = 0;    // seconds
  double bandwidth = 0;  // bytes/s, one direction
  // The engine's all-reduce, reduce-scatter and all-gather of 16 MiB over
  // every rank (medians, ranks aligned by a barrier), each less the
  // planner's ring-model latency terms over its bandwidth term, with the
  // ping-pong's latency and bandwidth: NetworkTier::collective_factor.
  std::array<double, 3> collective_factor{1.0, 1.0, 1.0};
};
NetworkMeasure measure_network(comm::Communicator& comm);

// The fraction of an asynchronous all-reduce (16 MiB) that compute running
// at the same time hides: (compute + collective - both at once) / collective,
// in [-1, 1] (medians of 15 interleaved repeats). Near 1 where dedicated
// engines move data; near 0 where the collective needs the cores the
// compute already uses (a CPU); below 0 when running them together costs
// more than one after the other (a polling thread steals the compute's core).
double measure_comm_overlap(comm::Communicator& comm);


struct Calibration {
  std::string cpu;                  // model name from /proc/cpuinfo
  int threads = 1, ranks = 1;
  int64_t cores = 0;                // the machine's online CPU cores
  int kernel_ranks = 1;             // ranks that measured the kernels at once (one per core)
  int64_t devices_per_node = 1;
  double memory_bytes = 0;          // per rank: the machine's memory / ranks
  double triad_bandwidth = 0;       // bytes/s, per rank (kernel_ranks measured at once)
  double peak_gemm = 0;             // best measured FLOP/s
  double attention_efficiency = 0;  // relative to peak_gemm, for the planner's formula
  AttentionTime attention;
  KernelRates kernels;              // seconds per element, by Backend call (kernel_rates.h)
  Profile in_situ = SystemSpec::unit_factors();  // [in_situ] factors (1: not measured)
  // The same from a step of each 16-bit precision whose GEMMs were measured.
  std::map<Precision, Profile> in_situ_lowp;
  int64_t in_situ_batch = 0;        // the micro-batch of the steps they came from
  // The same from steps of each other micro-batch calibrated (SystemSpec::in_situ_at).
  std::map<int64_t, std::map<Precision, Profile>> in_situ_at;
  int64_t kernel_rows = 0;          // the tokens they were timed at
  std::vector<GemmSample> gemm;
  // The bf16 and fp16 GEMMs on the same shapes, and the best of each
  // (empty, 0: not measured: not asked, or no real bf16 kernel on this CPU).
  std::vector<GemmSample> gemm_bf16, gemm_fp16;
  double peak_gemm_bf16 = 0, peak_gemm_fp16 = 0;
  std::optional<NetworkMeasure> network;  // empty with one rank
  double comm_overlap = 1.0;        // measure_comm_overlap (with >= 2 ranks)
  double seconds = 0;               // how long calibration took
};

// The system file text (TOML), with comments saying what was measured how.
std::string calibration_toml(const Calibration& c);

}  // namespace tessera::plan
