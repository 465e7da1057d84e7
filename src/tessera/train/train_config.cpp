#include "tessera/train/train_config.h"

#include <cmath>

#include "tessera/config/engine_cp.h"
#include "tessera/config/model_fields.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera {

namespace {

// Floats from the command line: CLI11 reads "inf", "nan" and 1e39 (inf as a
// float) as numbers; none of them is a usable setting.
void check_finite(double v, const char* flag) {
  TESSERA_CHECK(std::isfinite(v), "{} must be a finite number (got {})", flag, v);
}

}  // namespace

void TrainConfig::validate(int64_t world) const {
  model.validate();
  // zb-h1's and zbv's split backward stashes the dense MLP's dY; the MoE
  // layer's backward is one pass (model/moe_layer.cpp) with no input/weight
  // split yet.
  TESSERA_CHECK(!model.moe() || !splits_backward(par.schedule),
                "{} with {} {} is not supported yet (the MoE backward is not split into "
                "input and weight passes)", flag::num_experts, flag::schedule,
                schedule_kind_name(par.schedule));
  par.validate(model, world);
  // Context parallelism runs with the combinations its mpirun tests cover
  // (docs/context_parallel.md); the others are refused here, one line each
  // (the rule: cp_unsupported_in_engine, which the planner's engine
  // searches also follow).
  if (const char* with = cp_unsupported_in_engine(par, model))
    fail("{} {} with {} is not supported yet (docs/context_parallel.md)", flag::cp, par.cp, with);
  // Every float flag: finite first, so that the range checks below (and the
  // NaN-refusing forms they are written in) speak of real numbers.
  for (const auto& [v, flag] : {std::pair<double, const char*>{optim.lr, "--lr"},
                                {optim.min_lr, "--min-lr"},
                                {optim.weight_decay, "--weight-decay"},
                                {optim.clip_grad, "--clip-grad"},
                                {optim.beta1, "--adam-beta1"},
                                {optim.beta2, "--adam-beta2"},
                                {optim.eps, "--adam-eps"},
                                {valid_fraction, "--split-valid"},
                                {peak_tflops, "--peak-tflops"}})
    check_finite(v, flag);
  TESSERA_CHECK(!(bf16 && fp16), "--bf16 and --fp16 exclude each other: choose one");
  TESSERA_CHECK(bf16 || !grad_reduce_bf16, "--grad-reduce-in-bf16 needs --bf16");
  // As Megatron-LM asks: the gather to overlap is the sharded optimizer's
  // (ZeRO-1/2 here; ZeRO-3 gathers per layer anyway), and it goes with
  // overlapped gradient reductions.
  TESSERA_CHECK(!overlap_param_gather || par.zero_stage == 1 || par.zero_stage == 2,
                "--overlap-param-gather needs {} 1 or 2 (ZeRO-3 gathers each layer's parameters "
                "as it runs; 0 has nothing to gather)",
                flag::zero_stage);
  TESSERA_CHECK(!overlap_param_gather || overlap_grad_reduce,
                "--overlap-param-gather needs --overlap-grad-reduce");
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
  TESSERA_CHECK(test_fraction >= 0 && valid_fraction + test_fraction < 1,
                "--split: validation + test shares must leave some training data (got {} + {})",
                valid_fraction, test_fraction);
  TESSERA_CHECK(eval_interval == 0 || valid_fraction > 0 || !valid_data_paths.empty(),
                "--eval-interval needs validation data (--split-valid > 0, --split with a "
                "validation share, or --valid-data-path)");
  TESSERA_CHECK(log_interval >= 1, "--log-interval must be >= 1 (got {})", log_interval);
  TESSERA_CHECK(peak_tflops >= 0, "--peak-tflops must be >= 0 (got {})", peak_tflops);
  TESSERA_CHECK(save_interval >= 0, "--save-interval must be >= 0 (got {})", save_interval);
  TESSERA_CHECK(save_keep >= 0, "--save-keep must be >= 0 (got {})", save_keep);
  TESSERA_CHECK(save_interval == 0 || !save_dir.empty(), "--save-interval needs --save DIR");
  for (const auto& [flag, on] :
       {std::pair{"--finetune", finetune}, {"--no-load-optim", no_load_optim},
        {"--no-load-rng", no_load_rng}, {"--use-checkpoint-args", use_checkpoint_args}})
    TESSERA_CHECK(!on || !load_dir.empty(), "{} needs --load DIR (the checkpoint to start from)",
                  flag);
  TESSERA_CHECK(trace_step >= 0 && trace_step <= train_iters,
                "--trace-step must be in [0, --train-iters] (got {})", trace_step);
  TESSERA_CHECK(exit_duration_in_mins >= 0 && std::isfinite(exit_duration_in_mins),
                "--exit-duration-in-mins must be a finite number >= 0 (got {})",
                exit_duration_in_mins);
  TESSERA_CHECK(exit_interval >= 0, "--exit-interval must be >= 0 (got {})", exit_interval);
  TESSERA_CHECK(threads >= 0 && threads <= kMaxThreads, "--threads must be in [0, {}] (got {})",
                kMaxThreads, threads);
  // Token counts the data sampler and the logs keep in int64: a step's
  // tokens, the whole run's samples, and one micro-batch's logits.
  const int64_t step_tokens =
      checked_mul(par.global_batch, model.seq_length, "--global-batch-size x --seq-length");
  checked_mul(train_iters, step_tokens, "--train-iters x --global-batch-size x --seq-length");
  // One micro-batch's activations: every layer's rows (a few hidden widths
  // and two MLP widths each) and the logits, in fp32.
  static const std::string acts_what =
      fmt::format("one micro-batch's activations ({} x --seq-length x model)", flag::micro_batch);
  const char* acts = acts_what.c_str();
  const int64_t rows = checked_mul(par.micro_batch, model.seq_length, acts);
  const int64_t layer_width =
      checked_add(checked_mul(16, model.hidden_size, acts), checked_mul(2, model.ffn(), acts), acts);
  const int64_t width = checked_add(checked_mul(model.num_layers, layer_width, acts),
                                    model.padded_vocab(par.tp), acts);
  checked_mul(checked_mul(rows, width, acts), 4, acts);
  static const std::string eval_what =
      fmt::format("--eval-iters x {} x --seq-length", flag::micro_batch);
  checked_mul(eval_iters, rows, eval_what.c_str());
}

}  // namespace tessera
