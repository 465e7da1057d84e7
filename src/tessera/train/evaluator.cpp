#include "tessera/train/evaluator.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/core/error.h"
#include "tessera/core/timer.h"
#include "tessera/train/forward_losses.h"

namespace tessera {

namespace fs = std::filesystem;

double EvalResult::perplexity() const { return std::exp(loss); }

EvalModel open_eval_model(const std::string& checkpoint, const std::string& safetensors,
                          const std::string& hf_config) {
  TESSERA_CHECK(checkpoint.empty() != safetensors.empty(),
                "tessera eval needs exactly one of --checkpoint DIR and --safetensors FILE");
  EvalModel m;
  if (!checkpoint.empty()) {
    m.checkpoint = ckpt::open_checkpoint(checkpoint);
    const ckpt::Checkpoint& ck = *m.checkpoint;
    m.config = ck.run.model;
    m.micro_batch = ck.run.par.micro_batch;
    m.tokenizer = ck.run.tokenizer;
    m.tokenizer_hash = ck.run.tokenizer_hash;
    m.label = fmt::format("{} (step {})", ck.path, ck.state.step);
    return m;
  }
  TESSERA_CHECK(fs::is_regular_file(safetensors), "--safetensors {}: no such file", safetensors);
  const std::string cfg_path =
      hf_config.empty() ? (fs::path(safetensors).parent_path() / "config.json").string()
                        : hf_config;
  if (hf_config.empty())
    TESSERA_CHECK(fs::is_regular_file(cfg_path),
                  "--safetensors {}: no config.json beside it (name one with --hf-config)",
                  safetensors);
  else
    TESSERA_CHECK(fs::is_regular_file(cfg_path), "--hf-config {}: no such file", hf_config);
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(ckpt::read_file(cfg_path));
  } catch (const nlohmann::json::exception& e) {
    fail("--hf-config {}: {}", cfg_path, e.what());
  }
  m.config = ckpt::model_from_hf(cfg);
  m.safetensors = safetensors;
  m.label = safetensors;
  // As `tessera import`: a tokenizer beside the weights goes with them.
  const fs::path dir = fs::absolute(fs::path(safetensors)).parent_path();
  if (fs::is_regular_file(dir / "vocab.json") && fs::is_regular_file(dir / "merges.txt"))
    m.tokenizer = dir.string();
  return m;
}

namespace {

// Copies this rank's slice of every tensor of `whole` (one process, tp 1)
// into `part`. Tensors are matched by name and global index, as checkpoints
// are; the tp layout's extra vocabulary padding rows stay zero.
void copy_slices(const GPT& whole, GPT& part) {
  const ParamLayout& L = part.layout();
  float* out = part.params().f32();
  const float* in = const_cast<GPT&>(whole).params().f32();
  for (const ParamEntry& e : L.entries()) {
    const ParamEntry& w = whole.layout().find(e.name);
    const int64_t have = w.global_shape.numel();  // elements of the whole tensor
    ckpt::slice_of(L, e).for_each_run(0, e.numel(), [&](int64_t local, int64_t global, int64_t n) {
      const int64_t copied = std::clamp<int64_t>(have - global, 0, n);
      std::copy_n(in + w.offset + global, copied, out + e.offset + local);
      std::fill_n(out + e.offset + local + copied, n - copied, 0.0f);
    });
  }
}

}  // namespace

void EvalModel::load_into(GPT& model) const {
  if (checkpoint) {
    ckpt::check_same_model(*checkpoint, model.config());
    ckpt::load_params(*checkpoint, model.layout(), 0, model.layout().numel(),
                      model.params().f32());
    return;
  }
  // The whole model on every rank first (a safetensors file has no slices),
  // then this rank's part of it.
  GPT whole(config, ParamLayout::build(config, ParallelConfig{}, 0, 0), {.own_grads = false});
  ckpt::import_hf(safetensors, whole);
  copy_slices(whole, model);
}

namespace {

// One micro-batch shape's machinery: activations (one stage) or a pipeline
// executor whose slots hold B windows.
struct Engine {
  int64_t B = 0;
  Activations acts;
  std::unique_ptr<PipelineExecutor> pipe;

  Engine(GPT& model, comm::Grid& grid, const TrainConfig& c, int64_t b) : B(b) {
    const int64_t T = c.model.seq_length;
    if (c.par.pp > 1)
      pipe = std::make_unique<PipelineExecutor>(
          model, grid, PipelineOptions{ScheduleKind::OneFOneB, 1, 1, B, T});
    else
      activations_init(acts, model.act_shape(B, T));
  }
  std::vector<float> run(GPT& model, const BatchSource& data, int64_t T,
                         const std::vector<int64_t>& firsts) {
    return forward_losses({&model, pipe.get(), pipe ? nullptr : &acts, nullptr, &data,
                           Split::Valid, B, T, nullptr},
                          firsts);
  }
};

}  // namespace

EvalResult evaluate_model(const EvalModel& m, const TrainConfig& c, const BatchSource& data,
                          int64_t windows, comm::Communicator& world, comm::Grid& grid) {
  Stopwatch sw;
  const int64_t B = c.par.micro_batch, T = c.model.seq_length;
  const int64_t dp = c.par.dp, dp_rank = grid.coord().dp;
  if (windows <= 0) windows = data.windows(Split::Valid);
  TESSERA_CHECK(windows > 0, "eval: the data has no validation windows to read");
  // Every rank runs all of an MoE layer's experts here (no ep group): the
  // layout holds them all.
  ParallelConfig par = c.par;
  par.ep = 1;
  ParamLayout layout = ParamLayout::build(c.model, par, grid.coord().tp, grid.coord().pp);
  GPT model(c.model, layout, {.own_grads = false, .tp = TensorParallel{&grid.tp()}});
  m.load_into(model);

  // Full micro-batches k = 0, 1, ... go to dp rank k % dp; the rest of the
  // windows (fewer than B) form one short micro-batch on the next dp rank.
  const int64_t full = windows / B, rest = windows % B;
  std::vector<int64_t> firsts;  // (full / dp or one more,) first window of each of this rank's
  for (int64_t k = dp_rank; k < full; k += dp) firsts.push_back(k * B);
  double sum = 0;  // sum of token losses on this dp rank (its tp and pp ranks hold the same)
  if (!firsts.empty()) {
    Engine e(model, grid, c, B);
    for (const float l : e.run(model, data, T, firsts)) sum += double(l) * double(B * T);
  }
  if (rest > 0 && full % dp == dp_rank) {
    Engine e(model, grid, c, rest);
    sum += double(e.run(model, data, T, {full * B}).front()) * double(rest * T);
  }
  // Every dp rank's sum, in double, added up in rank order (the same on all).
  std::vector<double> sums(static_cast<size_t>(dp));  // (dp,)
  grid.dp().all_gather(&sum, sums.data(), 2, Precision::Fp32);  // a double as two floats' bytes
  double total = 0;
  for (const double s : sums) total += s;
  EvalResult r;
  r.windows = windows;
  r.tokens = windows * T;
  r.loss = total / double(r.tokens);
  r.seconds = sw.elapsed();
  (void)world;
  return r;
}

}  // namespace tessera
