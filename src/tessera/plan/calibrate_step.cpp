// The in-situ part of `tessera calibrate`: one training micro-batch through
// the engine itself, and how much slower each kind of work ran there than
// the calibration's tables (timed alone) predict for the same step.
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"
#include "tessera/plan/calibrate.h"
#include "tessera/plan/layout_cost.h"

namespace tessera::plan {

Profile measure_training_step(const GPTConfig& m, int64_t micro_batch, int reps,
                              Precision precision) {
  const ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout, {.precision = precision});
  model.init(1);
  model.refresh_working_copy();
  const int64_t N = micro_batch * m.seq_length;
  std::vector<int32_t> inputs(static_cast<size_t>(N)), targets(static_cast<size_t>(N));  // (B, T)
  for (int64_t i = 0; i < N; ++i) {
    inputs[size_t(i)] = int32_t(rng_u64(7, 0, uint64_t(i)) % uint64_t(m.vocab_size));
    targets[size_t(i)] = int32_t(rng_u64(7, 1, uint64_t(i)) % uint64_t(m.vocab_size));
  }
  Activations acts;
  activations_init(acts, model.act_shape(micro_batch, m.seq_length));
  // Training mode: the model's dropout (if any) runs, as in a training step.
  acts.dropout = DropoutContext{.training = true, .seed = 1};
  Profile profile;
  acts.profile = &profile;
  // fp16 trains with its loss scaled up (dynamic loss scaling holds the
  // scale as high as no overflow allows: 2^24 in the main job's --fp16 run),
  // which keeps its gradients in fp16's normal range; unscaled, many would
  // be fp16 subnormals, which cost the scalar conversions more (cast.cpp).
  // 2^16: far from both ends for the calibration's model at init.
  const float loss_scale = precision == Precision::Fp16 ? 65536.0f : 1.0f;
  std::vector<Profile> runs;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    profile.reset();
    model.forward(acts, inputs.data(), targets.data());
    model.backward(acts, inputs.data(), targets.data(), loss_scale / float(N));
    if (rep > 0) runs.push_back(profile);
  }
  return upper_median(runs);
}

Profile in_situ_factors(const Profile& measured, const SystemSpec& tables, const GPTConfig& m,
                        int64_t micro_batch, Precision precision) {
  PlanLayout L;
  L.par.micro_batch = micro_batch;
  L.par.global_batch = micro_batch;
  L.precision = precision;
  L.engine = true;
  L.flash_attention = true;
  SystemSpec alone = tables;
  alone.in_situ = SystemSpec::unit_factors();
  alone.in_situ_lowp.clear();
  const Profile predicted = evaluate_layout(m, alone, L).stages.front().ops;
  Profile f = SystemSpec::unit_factors();
  // Dropout and casts: measured only where the step has them (a model with
  // dropout; a bf16 / fp16 step).
  for (Op op : {Op::Gemm, Op::Attention, Op::LayerNorm, Op::Gelu, Op::Residual, Op::Embedding,
                Op::Loss, Op::Dropout, Op::Cast})
    if (measured[op] > 0 && predicted[op] > 0) f[op] = measured[op] / predicted[op];
  return f;
}

}  // namespace tessera::plan
