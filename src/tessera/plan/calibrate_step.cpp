// The in-situ part of `tessera calibrate`: one training micro-batch through
// the engine itself, and how much slower each kind of work ran there than
// the calibration's tables (timed alone) predict for the same step.
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"
#include "tessera/plan/calibrate.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/training_step.h"

namespace tessera::plan {

TrainingStep::TrainingStep(const GPTConfig& m, int64_t micro_batch, Precision precision,
                           const kernels::Backend* backend)
    : config_(m),
      layout_(ParamLayout::build(m, ParallelConfig{}, 0, 0)),
      model_(m, layout_, {.precision = precision, .backend = backend}) {
  model_.init(1);
  model_.refresh_working_copy();
  const int64_t N = micro_batch * m.seq_length;
  inputs_.resize(size_t(N));
  targets_.resize(size_t(N));
  for (int64_t i = 0; i < N; ++i) {
    inputs_[size_t(i)] = int32_t(rng_u64(7, 0, uint64_t(i)) % uint64_t(m.vocab_size));
    targets_[size_t(i)] = int32_t(rng_u64(7, 1, uint64_t(i)) % uint64_t(m.vocab_size));
  }
  activations_init(acts_, model_.act_shape(micro_batch, m.seq_length));
  // Training mode: the model's dropout (if any) runs, as in a training step.
  acts_.dropout = DropoutContext{.training = true, .seed = 1};
  // fp16 trains with its loss scaled up (dynamic loss scaling holds the
  // scale as high as no overflow allows: 2^24 in the main job's --fp16 run),
  // which keeps its gradients in fp16's normal range; unscaled, many would
  // be fp16 subnormals, which cost the scalar conversions more (cast.cpp).
  // 2^16: far from both ends for the calibration's model at init.
  loss_scale_ = precision == Precision::Fp16 ? 65536.0f : 1.0f;
}

void TrainingStep::run(Profile* profile) {
  if (profile != nullptr) profile->reset();
  acts_.profile = profile;
  model_.forward(acts_, inputs_.data(), targets_.data());
  model_.backward(acts_, inputs_.data(), targets_.data(), loss_scale_ / float(inputs_.size()));
}

std::vector<Profile> measure_training_steps(const GPTConfig& m, int64_t micro_batch, int reps,
                                            Precision precision) {
  TrainingStep step(m, micro_batch, precision);
  Profile profile;
  std::vector<Profile> runs;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    step.run(&profile);
    if (rep > 0) runs.push_back(profile);
  }
  return runs;
}

Profile measure_training_step(const GPTConfig& m, int64_t micro_batch, int reps,
                              Precision precision) {
  return upper_median(measure_training_steps(m, micro_batch, reps, precision));
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
