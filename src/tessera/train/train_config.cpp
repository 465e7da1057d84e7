#include "tessera/train/train_config.h"

#include "tessera/core/error.h"

namespace tessera {

void TrainConfig::validate(int64_t world) const {
  model.validate();
  par.validate(model, world);
  TESSERA_CHECK(!(bf16 && fp16), "--bf16 and --fp16 exclude each other: choose one");
  TESSERA_CHECK(bf16 || !grad_reduce_bf16, "--grad-reduce-in-bf16 needs --bf16");
  {
    const LossScalerConfig d;
    const LossScalerConfig& l = loss_scale;
    const bool given = l.dynamic != d.dynamic || l.static_scale != d.static_scale ||
                       l.initial_scale != d.initial_scale || l.min_scale != d.min_scale ||
                       l.window != d.window || l.hysteresis != d.hysteresis;
    TESSERA_CHECK(fp16 || !given,
                  "--loss-scale, --initial-loss-scale, --min-loss-scale, --loss-scale-window and "
                  "--hysteresis need --fp16");
    if (fp16) LossScaler check(l);  // throws naming the bad value
  }
  TESSERA_CHECK(train_iters >= 1, "--train-iters must be >= 1 (got {})", train_iters);
  TESSERA_CHECK(optim.lr > 0, "--lr must be > 0 (got {})", optim.lr);
  TESSERA_CHECK(optim.min_lr >= 0 && optim.min_lr <= optim.lr,
                "--min-lr ({}) must be in [0, --lr ({})]", optim.min_lr, optim.lr);
  TESSERA_CHECK(optim.warmup_iters >= 0, "--lr-warmup-iters must be >= 0 (got {})",
                optim.warmup_iters);
  TESSERA_CHECK(optim.decay_iters >= 0, "--lr-decay-iters must be >= 0 (got {})",
                optim.decay_iters);
  TESSERA_CHECK(optim.weight_decay >= 0, "--weight-decay must be >= 0 (got {})",
                optim.weight_decay);
  TESSERA_CHECK(optim.clip_grad >= 0, "--clip-grad must be >= 0 (got {})", optim.clip_grad);
  TESSERA_CHECK(optim.beta1 >= 0 && optim.beta1 < 1, "--adam-beta1 must be in [0, 1) (got {})",
                optim.beta1);
  TESSERA_CHECK(optim.beta2 >= 0 && optim.beta2 < 1, "--adam-beta2 must be in [0, 1) (got {})",
                optim.beta2);
  TESSERA_CHECK(optim.eps > 0, "--adam-eps must be > 0 (got {})", optim.eps);
  TESSERA_CHECK(valid_fraction >= 0 && valid_fraction < 1,
                "--split-valid must be in [0, 1) (got {})", valid_fraction);
  TESSERA_CHECK(eval_interval >= 0, "--eval-interval must be >= 0 (got {})", eval_interval);
  TESSERA_CHECK(eval_iters >= 1, "--eval-iters must be >= 1 (got {})", eval_iters);
  TESSERA_CHECK(eval_interval == 0 || valid_fraction > 0,
                "--eval-interval needs a validation split (--split-valid > 0)");
  TESSERA_CHECK(log_interval >= 1, "--log-interval must be >= 1 (got {})", log_interval);
  TESSERA_CHECK(peak_tflops >= 0, "--peak-tflops must be >= 0 (got {})", peak_tflops);
  TESSERA_CHECK(save_interval >= 0, "--save-interval must be >= 0 (got {})", save_interval);
  TESSERA_CHECK(save_keep >= 0, "--save-keep must be >= 0 (got {})", save_keep);
  TESSERA_CHECK(save_interval == 0 || !save_dir.empty(), "--save-interval needs --save DIR");
  TESSERA_CHECK(trace_step >= 0 && trace_step <= train_iters,
                "--trace-step must be in [0, --train-iters] (got {})", trace_step);
  TESSERA_CHECK(par.pp == 1 || eval_interval == 0,
                "--eval-interval with --pipeline-model-parallel-size {}: validation through the "
                "pipeline is not implemented yet",
                par.pp);
  TESSERA_CHECK(threads >= 0, "--threads must be >= 0 (got {})", threads);
}

}  // namespace tessera
