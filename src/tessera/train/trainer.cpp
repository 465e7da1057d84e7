#include "tessera/train/trainer.h"

#include "tessera/train/moe_metrics.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <omp.h>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/config/config_json.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/ckpt/zero_shard.h"
#include "tessera/comm/collective_log.h"
#include "tessera/comm/grid.h"
#include "tessera/comm/local_communicator.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/model/flops.h"
#include "tessera/optim/grad_clip.h"
#include "tessera/parallel/pipeline_trace.h"
#include "tessera/train/forward_losses.h"
#include "tessera/train/interval_meter.h"
#include "tessera/train/load_options.h"
#include "tessera/train/metrics_file.h"
#include "tessera/train/progress.h"
#include "tessera/train/tensorboard_writer.h"

namespace tessera {

using comm::ReduceOp;

// Warm-up + cosine decay to min_lr at decay_iters (default: the whole run).
static LrSchedule lr_schedule_of(const TrainConfig& cfg) {
  return {cfg.optim.lr, cfg.optim.min_lr, cfg.optim.warmup_iters,
          cfg.optim.decay_iters > 0 ? cfg.optim.decay_iters : cfg.train_iters};
}

Trainer::Trainer(const TrainConfig& cfg, const BatchSource& data, comm::Communicator* world,
                 comm::Grid* grid)
    : cfg_(cfg),
      data_(data),
      lr_(lr_schedule_of(cfg)) {
  TESSERA_CHECK(data.vocab_size() <= cfg.model.vocab_size,
                "the data's vocabulary ({}) is larger than the model's ({})", data.vocab_size(),
                cfg.model.vocab_size);
  TESSERA_CHECK(!world == !grid, "Trainer: world and grid go together");
  if (grid) {
    world_ = world;
    dp_group_ = &grid->dp();
    cp_group_ = grid->cp();
    tp_rank_ = grid->coord().tp;
    pp_rank_ = grid->coord().pp;
  } else {
    local_world_ = std::make_unique<comm::LocalCommunicator>("world");
    local_dp_ = std::make_unique<comm::LocalCommunicator>("dp");
    world_ = local_world_.get();
    dp_group_ = local_dp_.get();
  }
  TESSERA_CHECK(dp_group_->size() == cfg.par.dp, "data-parallel size {} but the grid has {}",
                cfg.par.dp, dp_group_->size());
  const int zero = cfg.par.zero_stage;
  // Under expert parallelism this rank holds its ep rank's E / ep experts.
  comm::Communicator* ep = grid ? grid->ep() : nullptr;
  ParamLayout layout =
      ParamLayout::build(cfg.model, cfg.par, tp_rank_, pp_rank_, ep ? ep->rank() : 0);
  comm::Communicator* tp = grid ? &grid->tp() : nullptr;
  model_ = std::make_unique<GPT>(
      cfg.model, layout,
      GPTOptions{.own_params = zero < 3,
                 .own_grads = zero < 2,
                 .tp = TensorParallel{tp, cfg.par.sequence_parallel},
                 .ep = ExpertParallel{ep, cfg.par.moe_dispatcher},
                 .precision = cfg.precision(),
                 .recompute = cfg.par.recompute,
                 .cp = ContextParallel(cp_group_, cfg.model.seq_length,
                                       cfg.par.cp_comm == CpCommType::AllGather)});
  const ContextParallel& cp = model_->context_parallel();
  if (cp.active()) cp_rows_ = cp.positions();
  if (cfg.fp16) scaler_ = std::make_unique<LossScaler>(cfg.loss_scale);
  // Each cp rank sees part of every sequence: its gradient is a partial sum
  // like a dp rank's, so gradients are reduced and ZeRO state sharded over
  // dp x cp (the dp group itself without cp).
  dp_ = std::make_unique<DataParallel>(
      *model_, grid ? grid->dp_cp() : *dp_group_, zero, cfg.optim, tp, grid ? &grid->pp() : nullptr,
      DataParallelOptions{.grad_reduce_bf16 = cfg.grad_reduce_bf16,
                          .overlap_grad_reduce = cfg.overlap_grad_reduce,
                          .overlap_param_gather = cfg.overlap_param_gather,
                          .split_backward = cfg.par.split_backward(),
                          .profile = &profile_,
                          .expert_dp = grid ? &grid->expert_dp() : nullptr,
                          .ep = ep});
  dp_->init_params(cfg.seed);
  const int64_t B = cfg.par.micro_batch, T = cfg.model.seq_length;
  const int64_t Tl = cp.local_T();  // rows of each sequence on this rank (T without cp)
  const ActShape shape = model_->act_shape(B, Tl);
  if (cfg.par.pp > 1) {
    // Activations live in the executor's in-flight slots.
    pipe_ = std::make_unique<PipelineExecutor>(
        *model_, *grid,
        PipelineOptions{cfg.par.schedule, cfg.par.virtual_stages, cfg.par.accumulation_steps(), B,
                        Tl, &profile_, cfg.model.moe() ? &moe_sums_ : nullptr});
  } else {
    activations_init(acts_, shape);
  }
  // The cp ring's scratch, allocated now rather than by the first layer:
  // memory the run holds for its whole length, counted with the activations
  // (16-bit qkv and out: their widened copies too).
  cp.reserve(B, shape.heads(), shape.precision != Precision::Fp32);
  acts_.profile = &profile_;
  if (cfg.model.moe()) acts_.moe_sums = &moe_sums_;
  window_.resize(size_t(B * (T + 1)));
  inputs_.resize(size_t(B * Tl));
  targets_.resize(size_t(B * Tl));
  peak_ = resolve_peak(cfg.peak_tflops,
                       cfg.peak_file.empty() ? default_peak_file() : cfg.peak_file,
                       omp_get_max_threads(), cfg.precision());
}

Trainer::~Trainer() = default;

void Trainer::load_batch(Split split, int64_t first_sample, int32_t* inputs, int32_t* targets) {
  const int64_t B = cfg_.par.micro_batch, T = cfg_.model.seq_length;
  ProfileScope t(&profile_, Op::Data);
  data_.fill(split, first_sample, B, T, window_.data());
  if (cp_rows_.empty())
    split_windows(window_.data(), B, T, inputs, targets);
  else
    split_windows_at(window_.data(), B, T, cp_rows_, inputs, targets);
}

DropoutContext Trainer::train_dropout(int64_t step, int64_t first_sample) const {
  return {true, cfg_.seed, step, first_sample};
}

float Trainer::run_micro_batch(const MicroBatch& mb) {
  load_batch(Split::Train, mb.first_sample, inputs_.data(), targets_.data());
  acts_.dropout = train_dropout(mb.step, mb.first_sample);
  const double t0 = trace_now_us();
  float loss = model_->forward(acts_, inputs_.data(), targets_.data(), dp_.get());
  const double t1 = trace_now_us();
  // The step's first backward writes the weight gradients instead of adding.
  acts_.first_backward_of_step = mb.index == 0;
  model_->backward(acts_, inputs_.data(), targets_.data(), mb.dloss, dp_.get());
  if (mb.spans) {
    mb.spans->push_back({Action{ActionType::Forward, mb.index, 0}, t0, t1});
    mb.spans->push_back({Action{ActionType::Backward, mb.index, 0}, t1, trace_now_us()});
  }
  return loss;
}

bool Trainer::traced(int64_t step) const {
  const int64_t at = cfg_.trace_step > 0 ? cfg_.trace_step : cfg_.train_iters;
  return !cfg_.trace_file.empty() && step == at;
}

void Trainer::write_trace(int64_t step, const std::vector<TraceSpan>& mine) {
  auto spans = gather_spans(*world_, mine);
  if (world_->rank() != 0) return;
  // Under pipelining each track says which layers its rank runs (the split
  // may be uneven): "rank 2 (pp 1: layers 1-3)".
  std::vector<std::string> notes;
  if (cfg_.par.pp > 1) {
    const comm::GridLayout grid = comm::GridLayout::make(cfg_.par, world_->size());
    for (int r = 0; r < world_->size(); ++r) {
      const int64_t pp = grid.coord_of(r).pp;
      notes.push_back(fmt::format("pp {}: layers {}", pp,
                                  cfg_.par.stage_layers_str(cfg_.model.num_layers, pp)));
    }
  }
  write_chrome_trace(cfg_.trace_file, spans, notes);
  fmt::print("trace of step {} ({} rank{}) written to {}\n", step, world_->size(),
             world_->size() == 1 ? "" : "s", cfg_.trace_file);
}

// Sample numbering is layout-independent: step s owns samples
// [(s-1)*GB, s*GB); micro-batch k of dp rank r takes the B after (k*dp + r)*B.
static int64_t first_sample(const ParallelConfig& par, int64_t step, int64_t k, int64_t dp_rank) {
  return (step - 1) * par.global_batch + (k * par.dp + dp_rank) * par.micro_batch;
}

void Trainer::finish_step(int64_t step, float loss, StepStats& s) {
  // The mean over the global batch, identical on every rank, so a NaN stops
  // every rank at the same step instead of leaving some in a collective.
  if (cfg_.par.dp > 1) {
    ProfileScope t(&profile_, Op::Comm);
    loss = dp_group_->all_reduce_scalar(loss, ReduceOp::Sum) / float(cfg_.par.dp);
  }
  // Under cp each rank's loss is the mean over its T / cp rows of each
  // sequence (all ranks hold as many): their mean is the batch's.
  if (cp_group_) {
    ProfileScope t(&profile_, Op::Comm);
    loss = cp_group_->all_reduce_scalar(loss, ReduceOp::Sum) / float(cp_group_->size());
  }
  if (!std::isfinite(loss))
    throw CollectiveError(fmt::format("loss is {} at step {}: training diverged", loss, step));
  double sq;
  {
    ProfileScope t(&profile_, Op::GradNorm);
    sq = dp_->grad_norm_squared();
  }
  float unscale = 1.0f;
  if (scaler_) {
    // sq is summed over every tp, pp and dp shard and is the same on every
    // rank, so a non-finite gradient anywhere is seen everywhere: every rank
    // skips the same step and no rank is left in a collective.
    unscale = scaler_->inv_scale();
    s.loss_scale = scaler_->scale();
    s.skipped = scaler_->update(!std::isfinite(sq));
    s.skipped_steps = scaler_->skipped_steps();
    if (s.skipped) {
      dp_->skip_step();
      s.loss = loss;
      s.lr = lr_.at(step);
      s.grad_norm = float(std::sqrt(sq));
      return;
    }
    sq *= double(unscale) * double(unscale);
  }
  const double norm = std::sqrt(sq);
  if (!std::isfinite(norm))
    throw CollectiveError(
        fmt::format("gradient norm is {} at step {}: training diverged", norm, step));
  const float lr = lr_.at(step);
  dp_->optimizer_step(lr, clip_scale(norm, cfg_.optim.clip_grad) * unscale,
                      step - optim_step_base_);
  s.loss = loss;
  s.lr = lr;
  s.grad_norm = float(norm);
}

void Trainer::pipelined_step(int64_t step, StepStats& s) {
  const int64_t dp_rank = dp_group_->rank();
  PipelineCallbacks cb;
  cb.data = [&](int64_t mb, int32_t* inputs, int32_t* targets) {
    load_batch(Split::Train, first_sample(cfg_.par, step, mb, dp_rank), inputs, targets);
  };
  cb.dropout = [&](int64_t mb) {
    return train_dropout(step, first_sample(cfg_.par, step, mb, dp_rank));
  };
  cb.hooks = dp_.get();
  // What ZeRO means across the micro-batches of a pipelined step:
  //   0-1: every micro-batch accumulates into the full gradient buffer; each
  //        unit is reduced once, after the last micro-batch.
  //   2-3: there is no full buffer, so a layer's gradient is reduce-scattered
  //        into the shard after every micro-batch's backward of that layer
  //        (m reductions per layer per step, as DeepSpeed's ZeRO-2 does with
  //        accumulation); the embeddings and final norm, which every
  //        micro-batch touches at both ends of the pipeline, keep one buffer
  //        for the whole step and are reduced once.
  // In both cases the executor first sums the tied embedding's gradient
  // between the first and the last stage.
  const bool sharded_grads = cfg_.par.zero_stage >= 2;
  cb.reduce_grads = [&] {
    if (sharded_grads)
      dp_->end_micro_batch();
    else
      dp_->reduce_all();
  };
  // --overlap-grad-reduce, stages 0-1: each chunk's layers start their
  // reductions as the chunk's last Backward of the step finishes them (every
  // schedule: the executor says which Backward is a chunk's last); the
  // reduction at ReduceGrads then starts only what is left.
  //   Stages 2-3 under zb-h1 / zbv (split backward): a layer's gradient
  //   builds up in one buffer over the step's input and weight passes and
  //   is reduce-scattered once, after its chunk's last weight pass, with or
  //   without the flag (DataParallelOptions::split_backward).
  if ((sharded_grads && cfg_.par.split_backward()) ||
      (!sharded_grads && cfg_.overlap_grad_reduce && dp_group_->size() > 1)) {
    cb.before_backward = [&](int64_t, int64_t, bool last) { dp_->begin_chunk_backward(last); };
    cb.after_backward = [&](int64_t, int64_t) { dp_->end_chunk_backward(); };
  }
  dp_->begin_micro_batch(/*last=*/false);  // stages 0-1: no per-layer reductions mid-step
  cb.optimizer_step = [&] { finish_step(step, pipe_->loss(), s); };
  float dloss = 1.0f / float(cfg_.par.global_batch * cfg_.model.seq_length);
  if (scaler_) dloss *= scaler_->scale();  // --fp16: the scaled loss's gradient
  PipelineStepStats st = pipe_->step(cb, dloss);
  s.idle_fraction = st.idle_fraction;
  if (traced(step)) write_trace(step, st.spans);
}

StepStats Trainer::train_step(int64_t step) {
  Stopwatch sw;
  profile_.reset();
  world_->log().reset_counters();
  const int64_t T = cfg_.model.seq_length;
  StepStats s;
  moe_sums_.clear();
  dp_->begin_step();
  if (pipe_) {
    pipelined_step(step, s);
  } else {
    // Every token of the global batch weighs the same: d(mean loss)/d(token
    // loss). Summing over dp ranks then gives the gradient of the global mean.
    float dloss = 1.0f / float(cfg_.par.global_batch * T);
    if (scaler_) dloss *= scaler_->scale();  // --fp16: the scaled loss's gradient
    const int64_t accum = cfg_.par.accumulation_steps();
    // --trace without pipelining: each micro-batch's forward and backward,
    // the gradient reduction after the last one (ZeRO-2/3 reduce inside the
    // backward) and the optimizer step, as the pipeline's trace names them.
    std::vector<TraceSpan> spans;
    std::vector<TraceSpan>* trace = traced(step) ? &spans : nullptr;
    double loss_sum = 0;
    for (int64_t k = 0; k < accum; ++k) {
      dp_->begin_micro_batch(k == accum - 1);
      loss_sum += run_micro_batch(
          {step, k, first_sample(cfg_.par, step, k, dp_group_->rank()), dloss, trace});
      const double t0 = trace_now_us();
      dp_->end_micro_batch();
      if (trace && k == accum - 1)
        spans.push_back({Action{ActionType::ReduceGrads}, t0, trace_now_us()});
    }
    const double t0 = trace_now_us();
    finish_step(step, float(loss_sum / double(accum)), s);
    if (trace) {
      spans.push_back({Action{ActionType::OptimizerStep}, t0, trace_now_us()});
      write_trace(step, spans);
    }
  }
  dp_->end_step();

  if (cfg_.model.moe())
    moe_step_metrics(moe_sums_, model_->layout(), cfg_.par.accumulation_steps(), s);
  s.step = step;
  s.total_steps = cfg_.train_iters;
  s.seconds = sw.elapsed();
  s.tokens = cfg_.par.global_batch * T;
  FlopCount f = step_flops(cfg_.model, cfg_.par.global_batch, cfg_.par.recompute,
                           cfg_.par.schedule);
  s.model_flops = f.model;
  s.hardware_flops = f.hardware;
  s.peak_tflops = peak_.tflops;
  s.gemm_peak_tflops = peak_.gemm_tflops;
  s.ranks = world_->size();
  s.precision = precision_name(cfg_.precision());
  s.profile = profile_;
  const comm::CommCounters counters = world_->log().counters();
  for (size_t op = 0; op < counters.by_op.size(); ++op) {
    const comm::OpCounters& c = counters.by_op[op];
    s.comm_seconds += c.seconds;
    if (c.calls > 0)
      s.comm_seconds_by_op[std::string(comm::comm_op_name(comm::CommOp(op)))] = c.seconds;
  }
  for (const auto& [group, ops] : counters.by_group)
    for (size_t op = 0; op < ops.size(); ++op)
      if (ops[op].bytes > 0)
        s.comm_bytes[group + "/" + std::string(comm::comm_op_name(comm::CommOp(op)))] =
            ops[op].bytes;
  return s;
}

float Trainer::evaluate() {
  const int64_t B = cfg_.par.micro_batch, dp = dp_group_->size();
  dp_->finish_param_gather();  // --overlap-param-gather: the last step's gathers
  dp_->begin_step();
  double sum = 0;
  // The same eval_iters micro-batches whatever the layout, dealt round-robin.
  // Every rank runs the same number of forwards (ZeRO-3 gathers inside
  // them must pair up across ranks); a rank past the end repeats micro-batch
  // 0 and does not count it.
  // Under pp the micro-batches go through the pipeline forward only, and the
  // last stage's losses reach every stage (forward_losses.h).
  const int64_t rounds = (cfg_.eval_iters + dp - 1) / dp;
  std::vector<int64_t> firsts(static_cast<size_t>(rounds));  // (rounds,) first sample of each micro-batch
  for (int64_t j = 0; j < rounds; ++j) {
    const int64_t i = j * dp + dp_group_->rank();
    firsts[size_t(j)] = (i < cfg_.eval_iters ? i : 0) * B;
  }
  const std::vector<float> losses = forward_losses(
      {model_.get(), pipe_.get(), pipe_ ? nullptr : &acts_, dp_.get(), &data_, Split::Valid, B,
       cfg_.model.seq_length, &profile_, cp_rows_},
      firsts);
  for (int64_t j = 0; j < rounds; ++j)
    if (j * dp + dp_group_->rank() < cfg_.eval_iters) sum += losses[size_t(j)];
  dp_->end_step();
  if (dp > 1) sum = dp_group_->all_reduce_scalar(float(sum), ReduceOp::Sum);
  // cp: each rank's losses are means over its rows (equal counts): average them.
  if (cp_group_) sum = cp_group_->all_reduce_scalar(float(sum), ReduceOp::Sum) / cp_group_->size();
  return float(sum / double(cfg_.eval_iters));
}

int64_t Trainer::load(const std::string& dir) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir);
  if (is_logging_rank())
    for (const std::string& note : ck.notes) fmt::print("checkpoint: {}\n", note);
  TrainConfig c = cfg_;
  c.load_dir = dir;
  check_load_options(c, ck);  // cmd_train ran it before allocating; this is for library callers
  ckpt::check_same_tokenizer(ck, cfg_.vocab_file, cfg_.merge_file);
  dp_->finish_param_gather();  // nothing may still write the parameters it loads into
  ck.run.model = compared_model(c, ck);  // --finetune: its own sequence length
  ckpt::load_zero_shard(ck, *dp_, /*with_optimizer=*/loads_optimizer(cfg_));
  dp_->params_changed();  // --bf16 / --fp16: the working copy is remade from them
  // --fp16: the scale, its growth and hysteresis trackers and the skipped
  // count continue where they were (a checkpoint from a run without the
  // scaler leaves it at --initial-loss-scale). It is optimizer state: a
  // fresh optimizer starts a fresh scaler.
  if (scaler_ && loads_optimizer(cfg_) && ck.state.extra.contains("loss_scaler"))
    scaler_->load_state(ck.state.extra["loss_scaler"]);
  const int64_t step = loads_step(cfg_) ? ck.state.step : 0;
  start_step_ = step + 1;
  // Fresh AdamW moments count their bias correction from their own first
  // step, not from the iteration (--no-load-optim continues the iteration).
  optim_step_base_ = loads_optimizer(cfg_) ? 0 : step;
  if (is_logging_rank())
    fmt::print("{} from {} ({})\n", loads_step(cfg_) ? "resumed" : "fine-tuning", ck.path,
               describe_load(cfg_, ck));
  return step;
}

std::string Trainer::save(int64_t step) {
  dp_->finish_param_gather();  // --overlap-param-gather: the last step's gathers
  ckpt::TrainState state;
  state.step = step;
  state.consumed_samples = step * cfg_.par.global_batch;
  state.seed = cfg_.seed;
  if (scaler_) state.extra["loss_scaler"] = scaler_->state();
  ckpt::RunInfo info{cfg_.model, cfg_.par, cfg_.tokenizer, cfg_.vocab_file, cfg_.merge_file,
                     cfg_.tokenizer_hash};
  ckpt::SaveOptions opts;
  opts.keep = cfg_.save_keep;
  opts.comm = world_->size() > 1 ? world_ : nullptr;
  return ckpt::save_checkpoint(cfg_.save_dir, ckpt::zero_shard_view(*dp_, tp_rank_, pp_rank_), state, info,
                               opts);
}

std::vector<MemoryBytes> Trainer::memory_by_rank() const {
  MemoryBytes mine = dp_->memory();
  // The arena(s) and the cp ring's scratch beside them (model/context_parallel.h).
  mine.activations = double(activation_bytes() + model_->context_parallel().scratch_bytes());
  std::vector<MemoryBytes> all(size_t(world_->size()));  // (world,)
  // Four doubles travel as raw bytes (8 floats): data movement, no arithmetic.
  static_assert(sizeof(MemoryBytes) == 8 * sizeof(float));
  world_->all_gather(&mine, all.data(), 8, Precision::Fp32);
  return all;
}

nlohmann::json Trainer::run_header() const {
  nlohmann::json memory = nlohmann::json::array();
  for (const auto& r : memory_by_rank())
    memory.push_back({{"params", int64_t(r.params)},
                      {"grads", int64_t(r.grads)},
                      {"optimizer", int64_t(r.optimizer)},
                      {"activations", int64_t(r.activations)}});
  return {{"run",
           {{"model", model_to_json(cfg_.model)},
            // cp and cp_comm only where cp > 1 (config/parallel_fields.cpp),
            // as `tessera plan --validate` reads them (absent: cp 1).
            {"parallel", parallel_to_json(cfg_.par)},
            {"memory_bytes", memory},
            {"precision", precision_name(cfg_.precision())},
            {"overlap_grad_reduce", cfg_.overlap_grad_reduce},
            {"overlap_param_gather", cfg_.overlap_param_gather},
            {"threads", omp_get_max_threads()},
            {"ranks", world_->size()},
            {"rank", world_->rank()},
            {"system", "local"},
            {"wall_time", unix_seconds()}}}};
}

std::optional<EarlyExit> Trainer::run(const std::function<void(const StepStats&)>& on_step) {
  const bool logs = is_logging_rank();
  // From here on, with --exit-signal-handler, SIGTERM/SIGINT wait for the step's end.
  const ExitConditions exits(cfg_);
  // The checkpoint first: a resumed run keeps its metrics file up to that step.
  if (!cfg_.load_dir.empty()) load(cfg_.load_dir);
  std::unique_ptr<MetricsFile> metrics;
  // "{rank}" in the name gives every rank its own file; otherwise rank 0 writes.
  std::string metrics_path = cfg_.metrics_file;
  const size_t at = metrics_path.find("{rank}");
  if (at != std::string::npos) metrics_path.replace(at, 6, std::to_string(world_->rank()));
  if (!metrics_path.empty()) {
    const nlohmann::json header = run_header();  // collective: every rank takes part
    if (logs || at != std::string::npos)
      metrics = std::make_unique<MetricsFile>(
          metrics_path, cfg_.load_dir.empty() ? -1 : start_step_ - 1, header);
  }
  std::unique_ptr<TensorBoardWriter> tensorboard;
  if (!cfg_.tensorboard_dir.empty()) {
    double peak_memory = 0;  // the fullest rank's bytes (collective: every rank takes part)
    for (const auto& r : memory_by_rank()) peak_memory = std::max(peak_memory, r.total());
    if (logs) {
      tensorboard = std::make_unique<TensorBoardWriter>(cfg_.tensorboard_dir);
      tensorboard->write_scalars(start_step_, {{"memory-bytes", float(peak_memory)}});
    }
  }
  if (logs && start_step_ > cfg_.train_iters)
    fmt::print("nothing to train: the checkpoint is at step {}, --train-iters is {}\n",
               start_step_ - 1, cfg_.train_iters);
  if (start_step_ > cfg_.train_iters && !cfg_.save_dir.empty() &&
      !std::filesystem::exists(std::filesystem::path(cfg_.save_dir) /
                               ckpt::step_dir_name(start_step_ - 1))) {
    // --save to a directory without that step: the loaded state written in
    // this run's layout, as loaded (a reshard of the checkpoint:
    // tests/scripts/test_moe_ep.sh compares the two bit for bit).
    const std::string saved = save(start_step_ - 1);
    if (logs) fmt::print("saved {}\n", saved);
  }
  Progress bar(cfg_.train_iters, cfg_.progress && logs);
  IntervalMeter interval(cfg_.train_iters - start_step_ + 1);  // the log lines' means and ETA
  for (int64_t step = start_step_; step <= cfg_.train_iters; ++step) {
    StepStats s = train_step(step);
    if (cfg_.eval_interval > 0 && (step % cfg_.eval_interval == 0 || step == cfg_.train_iters))
      s.valid_loss = evaluate();
    s.wall_time = unix_seconds();
    if (metrics) metrics->write(step_to_json(s));
    if (tensorboard) tensorboard->write_step(s);
    interval.add(s);
    const bool line = step % cfg_.log_interval == 0 || step == 1 || step == cfg_.train_iters ||
                      s.valid_loss >= 0;
    if (logs && line) bar.println(interval.line(s));
    std::string saved;
    if (!cfg_.save_dir.empty() &&
        ((cfg_.save_interval > 0 && step % cfg_.save_interval == 0) || step == cfg_.train_iters)) {
      saved = save(step);
      if (logs) bar.println(fmt::format("saved {}", saved));
    }
    if (logs) bar.update(step, fmt::format("loss {:.3f}", s.loss));
    if (on_step) on_step(s);
    if (step == cfg_.train_iters) break;  // done: nothing left to stop early
    if (std::optional<EarlyExit> stop = exits.check(step, *world_)) {
      if (!cfg_.save_dir.empty()) stop->checkpoint = saved.empty() ? save(step) : saved;
      dp_->finish_param_gather();  // the caller may read the model (sampling, export)
      return stop;
    }
  }
  dp_->finish_param_gather();  // the caller may read the model (sampling, export)
  if (metrics) metrics->close();
  return std::nullopt;
}

}  // namespace tessera
