#include "tessera/train/trainer.h"

#include <cmath>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/kernels/cpu/elementwise.h"
#include "tessera/model/flops.h"
#include "tessera/optim/grad_clip.h"
#include "tessera/train/progress.h"

namespace tessera {

Trainer::Trainer(const TrainConfig& cfg, const BatchSource& data) : cfg_(cfg), data_(data) {
  TESSERA_CHECK(data.vocab_size() <= cfg.model.vocab_size,
                "the data's vocabulary ({}) is larger than the model's ({})", data.vocab_size(),
                cfg.model.vocab_size);
  ParamLayout layout = ParamLayout::build(cfg.model, cfg.par, 0, 0);
  model_ = std::make_unique<GPT>(cfg.model, layout);
  model_->init(cfg.seed);
  optim_ = std::make_unique<AdamW>(model_->layout(), 0, layout.numel(), cfg.optim);
  lr_.max_lr = cfg.optim.lr;
  lr_.min_lr = cfg.optim.min_lr;
  lr_.warmup_iters = cfg.optim.warmup_iters;
  lr_.decay_iters = cfg.optim.decay_iters > 0 ? cfg.optim.decay_iters : cfg.train_iters;
  const int64_t B = cfg.par.micro_batch, T = cfg.model.seq_length;
  activations_init(acts_, model_->act_shape(B, T));
  acts_.profile = &profile_;
  window_.resize(size_t(B * (T + 1)));
  inputs_.resize(size_t(B * T));
  targets_.resize(size_t(B * T));
  peak_ = resolve_peak(cfg.peak_tflops,
                       cfg.peak_file.empty() ? default_peak_file() : cfg.peak_file);
}

float Trainer::run_micro_batch(Split split, int64_t first_sample, bool backward, float dloss) {
  const int64_t B = cfg_.par.micro_batch, T = cfg_.model.seq_length;
  {
    ProfileScope t(&profile_, Op::Data);
    data_.fill(split, first_sample, B, T, window_.data());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        inputs_[b * T + t] = window_[b * (T + 1) + t];
        targets_[b * T + t] = window_[b * (T + 1) + t + 1];
      }
  }
  float loss = model_->forward(acts_, inputs_.data(), targets_.data());
  if (backward) model_->backward(acts_, inputs_.data(), targets_.data(), dloss);
  return loss;
}

StepStats Trainer::train_step(int64_t step) {
  Stopwatch sw;
  profile_.reset();
  const int64_t B = cfg_.par.micro_batch, T = cfg_.model.seq_length;
  const int64_t accum = cfg_.par.accumulation_steps();
  const int64_t dp = cfg_.par.dp, dp_rank = 0;
  // Every token of the global batch weighs the same: d(mean loss)/d(token loss).
  const float dloss = 1.0f / float(cfg_.par.global_batch * T);
  double loss_sum = 0;
  for (int64_t k = 0; k < accum; ++k) {
    // Sample numbering is layout-independent: step s owns samples
    // [(s-1)*GB, s*GB); micro-batch k of dp rank r takes the B after
    // (k*dp + r)*B.
    int64_t first = (step - 1) * cfg_.par.global_batch + (k * dp + dp_rank) * B;
    float loss = run_micro_batch(Split::Train, first, true, dloss);
    TESSERA_CHECK(std::isfinite(loss), "loss is {} at step {} (micro-batch {}): training diverged",
                  loss, step, k);
    loss_sum += loss;
  }
  double sq;
  {
    ProfileScope t(&profile_, Op::GradNorm);
    sq = cpu::sum_squares(model_->grads().f32(), model_->grads().numel());
  }
  const double norm = std::sqrt(sq);
  TESSERA_CHECK(std::isfinite(norm), "gradient norm is {} at step {}: training diverged", norm,
                step);
  const float lr = lr_.at(step);
  {
    ProfileScope t(&profile_, Op::Optimizer);
    optim_->step(model_->params().f32(), model_->grads().f32(), lr,
                 clip_scale(norm, cfg_.optim.clip_grad), step);
  }

  StepStats s;
  s.step = step;
  s.total_steps = cfg_.train_iters;
  s.loss = float(loss_sum / double(accum));
  s.lr = lr;
  s.grad_norm = float(norm);
  s.seconds = sw.elapsed();
  s.tokens = cfg_.par.global_batch * T;
  FlopCount f = step_flops(cfg_.model, cfg_.par.global_batch, cfg_.par.recompute);
  s.model_flops = f.model;
  s.hardware_flops = f.hardware;
  s.peak_tflops = peak_.tflops;
  s.profile = profile_;
  return s;
}

float Trainer::evaluate() {
  const int64_t B = cfg_.par.micro_batch;
  double sum = 0;
  for (int64_t i = 0; i < cfg_.eval_iters; ++i)
    sum += run_micro_batch(Split::Valid, i * B, false, 0.0f);
  return float(sum / double(cfg_.eval_iters));
}

int64_t Trainer::load(const std::string& dir) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir);
  for (const std::string& note : ck.notes) fmt::print("checkpoint: {}\n", note);
  ckpt::load_into(ck, *model_, optim_.get());
  TESSERA_CHECK(ck.has_optimizer_state, "--load {}: checkpoint {} has no optimizer state to resume",
                dir, ck.path);
  TESSERA_CHECK(ck.state.seed == cfg_.seed,
                "--load {}: the checkpoint was trained with --seed {}, this run has --seed {} (the "
                "data order would differ)",
                dir, ck.state.seed, cfg_.seed);
  start_step_ = ck.state.step + 1;
  fmt::print("resumed from {} (step {})\n", ck.path, ck.state.step);
  return ck.state.step;
}

std::string Trainer::save(int64_t step) {
  ckpt::TrainState state;
  state.step = step;
  state.consumed_samples = step * cfg_.par.global_batch;
  state.seed = cfg_.seed;
  ckpt::RunInfo info{cfg_.model, cfg_.par, cfg_.tokenizer};
  ckpt::SaveOptions opts;
  opts.keep = cfg_.save_keep;
  return ckpt::save_checkpoint(cfg_.save_dir, ckpt::whole_rank(*model_, optim_.get()), state, info,
                               opts);
}

void Trainer::run(const std::function<void(const StepStats&)>& on_step) {
  std::ofstream metrics;
  if (!cfg_.metrics_file.empty()) {
    metrics.open(cfg_.metrics_file);
    TESSERA_CHECK(bool(metrics), "--metrics-file {}: cannot open for writing", cfg_.metrics_file);
  }
  if (!cfg_.load_dir.empty()) load(cfg_.load_dir);
  Progress bar(cfg_.train_iters, cfg_.progress);
  for (int64_t step = start_step_; step <= cfg_.train_iters; ++step) {
    StepStats s = train_step(step);
    if (cfg_.eval_interval > 0 && (step % cfg_.eval_interval == 0 || step == cfg_.train_iters))
      s.valid_loss = evaluate();
    if (metrics.is_open()) metrics << step_to_json(s).dump() << "\n" << std::flush;
    if (step % cfg_.log_interval == 0 || step == 1 || step == cfg_.train_iters ||
        s.valid_loss >= 0)
      bar.println(format_step_line(s));
    if (!cfg_.save_dir.empty() &&
        ((cfg_.save_interval > 0 && step % cfg_.save_interval == 0) || step == cfg_.train_iters))
      bar.println(fmt::format("saved {}", save(step)));
    bar.update(step, fmt::format("loss {:.3f}", s.loss));
    if (on_step) on_step(s);
  }
}

}  // namespace tessera
