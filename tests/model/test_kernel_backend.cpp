// The kernel backend seam: a backend set on the model receives the model's
// kernels (a backend that derives from the CPU one and watches two ops
// stands in for a GPU backend), and the run is bit-identical to the
// default CPU backend. The step's profile gets each kind of work from the
// kernel calls themselves.
#include <gtest/gtest.h>

#include "tiny_model.h"

#include <vector>

#include "tessera/config/parallel_config.h"
#include "tessera/core/rng.h"
#include "tessera/kernels/cpu/cpu_backend.h"
#include "tessera/model/gpt.h"

namespace tessera {
namespace {

GPTConfig tiny() { return test::gpt16(2); }
constexpr int64_t kB = 2;

// The CPU kernels, counting the GEMMs and attention calls the model makes.
class CountingBackend : public kernels::CpuBackend {
 public:
  mutable int matmul_forwards = 0, matmul_backwards = 0, attention_forwards = 0;
  void matmul_forward(kernels::Act out, kernels::ConstAct inp, kernels::ConstAct weight,
                      const float* bias, int64_t N, int64_t C, int64_t OC) const override {
    ++matmul_forwards;
    CpuBackend::matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  void matmul_backward(float* dinp, float* dweight, float* dbias, kernels::ConstAct dout,
                       kernels::ConstAct inp, kernels::ConstAct weight, int64_t N, int64_t C,
                       int64_t OC, bool accumulate_dinp, bool accumulate_dweight) const override {
    ++matmul_backwards;
    CpuBackend::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC,
                                accumulate_dinp, accumulate_dweight);
  }
  void attention_forward(kernels::Act out, float* lse, kernels::ConstAct qkv, int64_t B,
                         int64_t T, const AttentionHeads& heads,
                         const DropoutSite* drop) const override {
    ++attention_forwards;
    CpuBackend::attention_forward(out, lse, qkv, B, T, heads, drop);
  }
};

struct StepResult {
  float loss = 0;
  std::vector<float> grads;
  Profile profile;
};

// One forward and backward of a fixed micro-batch on `backend` (null: the default).
StepResult run_once(const kernels::Backend* backend) {
  const GPTConfig m = tiny();
  GPT model(m, ParamLayout::build(m, ParallelConfig{}, 0, 0), {.backend = backend});
  model.init(11);
  Activations acts;
  activations_init(acts, model.act_shape(kB, m.seq_length));
  StepResult r;
  acts.profile = &r.profile;
  const int64_t N = kB * m.seq_length;
  std::vector<int32_t> in(N), tgt(N);  // (B, T) each
  for (int64_t i = 0; i < N; ++i) {
    in[size_t(i)] = int32_t(rng_u64(3, 0, uint64_t(i)) % uint64_t(m.vocab_size));
    tgt[size_t(i)] = int32_t(rng_u64(3, 1, uint64_t(i)) % uint64_t(m.vocab_size));
  }
  model.grads().zero();
  r.loss = model.forward(acts, in.data(), tgt.data());
  model.backward(acts, in.data(), tgt.data(), 1.0f / float(N));
  r.grads.assign(model.grads().f32(), model.grads().f32() + model.grads().numel());
  return r;
}

TEST(KernelBackend, TheModelRunsOnTheBackendItIsGiven) {
  const CountingBackend counting;
  const StepResult watched = run_once(&counting);
  // Per layer: qkv, proj, fc, fcproj; then the tied LM head.
  EXPECT_EQ(counting.matmul_forwards, 2 * 4 + 1);
  EXPECT_EQ(counting.matmul_backwards, 2 * 4 + 1);
  EXPECT_EQ(counting.attention_forwards, 2);

  const StepResult plain = run_once(nullptr);
  EXPECT_EQ(watched.loss, plain.loss);
  EXPECT_EQ(watched.grads, plain.grads);
}

TEST(KernelBackend, EveryKernelKindOfTheStepIsCharged) {
  const StepResult r = run_once(nullptr);
  for (Op op : {Op::Gemm, Op::Attention, Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding,
                Op::Loss})
    EXPECT_GT(r.profile[op], 0.0) << op_name(op);
  // One process, no tensor parallelism: nothing to communicate.
  EXPECT_EQ(r.profile[Op::Comm], 0.0);
}

}  // namespace
}  // namespace tessera
