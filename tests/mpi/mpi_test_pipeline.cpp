// Pipeline parallelism under mpirun, at two levels:
// - PipelineExecutor: a minimal step loop (executor step + AdamW on each
//   rank's flat buffer) must reproduce one process training the same global
//   batch, for GPipe, 1F1B, interleaved, zb-h1 and zbv schedules, alone and with tp 2 or
//   dp 2 beside it; the activation memory of each stage is the schedule's
//   peak in-flight count times one chunk's activations, and the trace has
//   one track per rank. Gradient clipping is off (clip_grad 0) in this loop:
//   a pipelined global norm must sum over pp ranks counting the tied token
//   table once, which is the trainer's job, not the executor's.
// - ZeroBubbleExact: zb-h1's split backward equals 1F1B bit for bit in fp32;
//   ZbvExact: so does zbv's V with an untied head, gathered by global name.
// - Pipeline: the trainer's pipelines (GPipe, 1F1B, interleaved, zb-h1, zbv) x tp x dp x
//   ZeRO x recompute, with clipping, against the one-process trainer run,
//   in fp32 and (with dropout) in bf16; each rank's activation memory equals
//   the planner's prediction for its stage exactly, in both precisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <span>

#include <fmt/core.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "mpi_test_env.h"
#include "rel.h"
#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"
#include "tessera/parallel/pipeline_executor.h"
#include "tessera/parallel/pipeline_trace.h"
#include "tiny_model.h"
#include "tiny_training.h"

namespace tessera {
namespace {

using test::grid_of;
using test::rel;
using test::world;

constexpr int64_t kB = 2, kT = 16, kM = 4;  // micro-batch, sequence, micro-batches per dp rank
constexpr int kSteps = 20;
constexpr uint64_t kSeed = 1234;

GPTConfig tiny_model(int64_t layers = 4) { return test::tiny_gpt(layers); }  // its seq_length is kT

AdamWConfig adamw_config() {
  AdamWConfig c;
  c.lr = 5e-3f;
  c.clip_grad = 0.0f;  // see the header comment
  return c;
}

// Sequence `seq` of the data: inputs (T) and the next tokens as targets (T).
void fill_sequence(int64_t seq, int32_t* inputs, int32_t* targets) {
  const int64_t V = tiny_model().vocab_size;  // the same for every layer count
  auto tok = [&](int64_t t) { return int32_t(rng_u64(42, uint64_t(seq), uint64_t(t)) % uint64_t(V)); };
  for (int64_t t = 0; t < kT; ++t) {
    inputs[t] = tok(t);
    targets[t] = tok(t + 1);
  }
}

void fill_micro_batch(int64_t first_seq, int32_t* inputs, int32_t* targets) {
  for (int64_t b = 0; b < kB; ++b) fill_sequence(first_seq + b, inputs + b * kT, targets + b * kT);
}

// One process, plain forward/backward over the global batch of dp * m
// micro-batches: the losses every layout must reproduce.
std::vector<float> single_process_losses(int64_t dp, int64_t layers = 4, bool untie = false) {
  GPTConfig model = tiny_model(layers);
  model.untie_embeddings = untie;
  ParallelConfig par;
  const ParamLayout layout = ParamLayout::build(model, par, 0, 0);
  GPT g(model, layout);
  g.init(kSeed);
  std::fill_n(g.grads().f32(), layout.numel(), 0.0f);
  Activations acts;
  activations_init(acts, g.act_shape(kB, kT));
  AdamW opt(layout, adamw_config());
  const int64_t K = dp * kM, GB = K * kB;
  const float dloss = 1.0f / float(GB * kT);
  std::vector<int32_t> in(size_t(kB * kT)), tg(size_t(kB * kT));
  std::vector<float> out;
  for (int64_t step = 1; step <= kSteps; ++step) {
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      fill_micro_batch((step - 1) * GB + k * kB, in.data(), tg.data());
      sum += g.forward(acts, in.data(), tg.data());
      g.backward(acts, in.data(), tg.data(), dloss);
    }
    opt.step(kernels::Ops(g.backend(), nullptr), g.params().f32(), Indexing::Global,
             g.grads().f32(), Indexing::Global, adamw_config().lr, 1.0f, step);
    out.push_back(float(sum / double(K)));
  }
  return out;
}

struct Case {
  const char* name;
  ScheduleKind kind;
  int pp, v, tp;
  bool sp = false;  // sequence parallelism: (Ns = N / tp, C) travels between stages
  // Uneven stages (--decoder-first/last-pipeline-num-layers; 0: not set)
  // of a model of `layers` layers.
  int first = 0, last = 0;
  int64_t layers = 4;
  bool untie = false;  // --untie-embeddings-and-output-weights: no tied table to sum
};

GPTConfig model_of(const Case& c) {
  GPTConfig m = tiny_model(c.layers);
  m.untie_embeddings = c.untie;
  return m;
}

// This rank's stage of a pipelined run, with the minimal step loop.
struct PipelinedRun {
  comm::Grid& grid;
  int64_t dp;
  ParamLayout layout;
  GPT model;
  PipelineExecutor exec;
  AdamW opt;
  int64_t last_backwards = 0;  // Backwards flagged last for their chunk, this step

  PipelinedRun(const Case& c, comm::Grid& g)
      : grid(g),
        dp(world().size() / (c.pp * c.tp)),
        layout(ParamLayout::build(model_of(c), par_of(c, dp), g.coord().tp, g.coord().pp)),
        model(model_of(c), layout, {.tp = TensorParallel{&g.tp(), c.sp}}),
        exec((init(), model), g, PipelineOptions{c.kind, c.v, kM, kB, kT}),
        opt(layout, adamw_config()) {}

  static ParallelConfig par_of(const Case& c, int64_t dp) {
    ParallelConfig p;
    p.tp = c.tp;
    p.pp = c.pp;
    p.dp = dp;
    p.virtual_stages = c.v;
    p.schedule = c.kind;
    p.micro_batch = kB;
    p.global_batch = kB * kM * dp;
    if (c.first > 0) p.first_stage_layers = c.first;
    if (c.last > 0) p.last_stage_layers = c.last;
    p.validate(tiny_model(c.layers), dp * c.pp * c.tp);
    return p;
  }
  void init() {
    model.init(kSeed);
    std::fill_n(model.grads().f32(), layout.numel(), 0.0f);
  }

  PipelineStepStats step(int64_t step) {
    const int64_t GB = dp * kM * kB, dp_rank = grid.coord().dp;
    PipelineCallbacks cb;
    cb.data = [&](int64_t mb, int32_t* in, int32_t* tg) {
      // Micro-batch k of dp rank r takes the B sequences after (k*dp + r)*B.
      fill_micro_batch((step - 1) * GB + (mb * dp + dp_rank) * kB, in, tg);
    };
    last_backwards = 0;
    cb.before_backward = [&](int64_t, int64_t, bool last) { last_backwards += last; };
    cb.reduce_grads = [&] {
      if (dp > 1) grid.dp().all_reduce(std::span<float>(model.grads().f32(), size_t(layout.numel())));
    };
    cb.optimizer_step = [&] {
      opt.step(kernels::Ops(model.backend(), nullptr), model.params().f32(), Indexing::Global,
               model.grads().f32(), Indexing::Global, adamw_config().lr, 1.0f, step);
    };
    PipelineStepStats st = exec.step(cb, 1.0f / float(GB * kT));
    if (dp > 1) st.loss = grid.dp().all_reduce_scalar(st.loss) / float(dp);
    return st;
  }
};

class PipelineExecutor : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    if (world().size() % (c.pp * c.tp) != 0 || world().size() < c.pp * c.tp)
      // Skipped, not failed: the same binary runs at every rank count CTest
      // registers (singleton, 2, 4, 8); this case runs at the one it names.
      GTEST_SKIP() << "needs a multiple of " << c.pp * c.tp << " ranks";
  }
};

TEST_P(PipelineExecutor, TwentyStepsMatchOneProcess) {
  const Case& c = GetParam();
  comm::Grid& grid = grid_of(c.tp, c.pp);
  PipelinedRun run(c, grid);
  const std::vector<float> ref = single_process_losses(run.dp, c.layers, c.untie);
  for (int64_t s = 1; s <= kSteps; ++s) {
    const PipelineStepStats st = run.step(s);
    EXPECT_LE(rel(st.loss, ref[size_t(s - 1)]), s == 1 ? 1e-5 : 1e-4)
        << c.name << " step " << s << ": " << st.loss << " vs " << ref[size_t(s - 1)];
    EXPECT_GE(st.idle_fraction, 0.0);
    EXPECT_LT(st.idle_fraction, 1.0);
  }
}

TEST_P(PipelineExecutor, ActivationMemoryIsPeakInFlightSlots) {
  const Case& c = GetParam();
  comm::Grid& grid = grid_of(c.tp, c.pp);
  PipelinedRun run(c, grid);
  run.step(1);
  EXPECT_EQ(run.last_backwards, c.v);  // one final Backward per chunk
  const int64_t peak = peak_in_flight(run.exec.actions());
  const int64_t rank = grid.coord().pp;
  const bool split = c.kind == ScheduleKind::ZeroBubbleH1 || c.kind == ScheduleKind::ZeroBubbleV;
  // This stage's layers, uneven or not, cut into v equal chunks.
  EXPECT_EQ(int64_t(run.layout.layers().size()),
            PipelinedRun::par_of(c, run.dp).stage_layer_count(c.layers, rank));
  EXPECT_EQ(run.model.stage_act_shape(kB, kT, c.v).L, int64_t(run.layout.layers().size()) / c.v);
  EXPECT_EQ(run.exec.slots(), peak);
  if (c.kind == ScheduleKind::GPipe) EXPECT_EQ(peak, kM);
  if (c.kind == ScheduleKind::OneFOneB) EXPECT_EQ(peak, std::min<int64_t>(kM, c.pp - rank));
  if (c.kind == ScheduleKind::ZeroBubbleH1) EXPECT_EQ(peak, std::min<int64_t>(kM, c.pp));
  if (c.kind == ScheduleKind::ZeroBubbleV) EXPECT_LE(peak, 2 * std::min<int64_t>(kM, c.pp));
  const ActShape shape = run.model.stage_act_shape(kB, kT, c.v);
  // The split backward's slots also hold each layer's stash of GEMM output gradients.
  const int64_t stash = split ? shape.L * layer_grad_stash_bytes(shape) : 0;
  EXPECT_EQ(run.exec.activation_bytes(), peak * (activations_bytes(shape) + stash));
}

TEST_P(PipelineExecutor, TraceHasOneTrackPerRank) {
  const Case& c = GetParam();
  comm::Grid& grid = grid_of(c.tp, c.pp);
  PipelinedRun run(c, grid);
  const PipelineStepStats st = run.step(1);
  const auto all = gather_spans(world(), st.spans);
  if (world().rank() != 0) return;
  ASSERT_EQ(int(all.size()), world().size());
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("tessera_pp_trace_{}.json", getpid()))
          .string();
  write_chrome_trace(path, all);
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::set<int> pids;
  size_t spans = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") {
      pids.insert(e.at("pid").get<int>());
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      ++spans;
    }
  EXPECT_EQ(int(pids.size()), world().size());
  size_t want = 0;
  for (const auto& r : all) want += r.size();
  EXPECT_EQ(spans, want);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineExecutor,
    ::testing::Values(Case{"gpipe_pp2", ScheduleKind::GPipe, 2, 1, 1},
                      Case{"1f1b_pp2", ScheduleKind::OneFOneB, 2, 1, 1},
                      Case{"interleaved_pp2_v2", ScheduleKind::Interleaved, 2, 2, 1},
                      Case{"gpipe_pp4", ScheduleKind::GPipe, 4, 1, 1},
                      Case{"1f1b_pp4", ScheduleKind::OneFOneB, 4, 1, 1},
                      Case{"1f1b_pp2_tp2", ScheduleKind::OneFOneB, 2, 1, 2},
                      Case{"1f1b_pp2_tp2_sp", ScheduleKind::OneFOneB, 2, 1, 2, true},
                      // Uneven stages: layers 0 | 1-3, 0-2 | 3, 0 | 1-2 | 3-4 | 5, and
                      // interleaved 0-1 | 2-5 | 6-7 | 8-11 (rank 0: 0-1, 6-7).
                      Case{"gpipe_pp2_first1", ScheduleKind::GPipe, 2, 1, 1, false, 1, 0},
                      Case{"1f1b_pp2_first1", ScheduleKind::OneFOneB, 2, 1, 1, false, 1, 0},
                      Case{"1f1b_pp2_last1", ScheduleKind::OneFOneB, 2, 1, 1, false, 0, 1},
                      Case{"gpipe_pp4_first1_last1", ScheduleKind::GPipe, 4, 1, 1, false, 1, 1, 6},
                      Case{"1f1b_pp4_first1_last1", ScheduleKind::OneFOneB, 4, 1, 1, false, 1, 1, 6},
                      Case{"interleaved_pp2_v2_first4_of12", ScheduleKind::Interleaved, 2, 2, 1,
                           false, 4, 0, 12},
                      Case{"1f1b_pp2_tp2_sp_last1", ScheduleKind::OneFOneB, 2, 1, 2, true, 0, 1, 3},
                      // Zero bubble (issue 36): backward split into input and weight passes.
                      Case{"zbh1_pp2", ScheduleKind::ZeroBubbleH1, 2, 1, 1},
                      Case{"zbh1_pp4", ScheduleKind::ZeroBubbleH1, 4, 1, 1},
                      Case{"zbh1_pp2_tp2", ScheduleKind::ZeroBubbleH1, 2, 1, 2},
                      Case{"zbh1_pp2_tp2_sp", ScheduleKind::ZeroBubbleH1, 2, 1, 2, true},
                      Case{"zbh1_pp2_first1", ScheduleKind::ZeroBubbleH1, 2, 1, 1, false, 1, 0},
                      // ZBV: two chunks per rank in a V (rank 0: the first and the
                      // last, the last rank's two meet in memory); at 4 ranks the
                      // pp 2 cases run beside dp 2. Uneven: chunks 0 | 1-2 | 3-4 | 5.
                      Case{"zbv_pp2", ScheduleKind::ZeroBubbleV, 2, 2, 1},
                      Case{"zbv_pp2_untied", ScheduleKind::ZeroBubbleV, 2, 2, 1, false, 0, 0, 4,
                           true},
                      Case{"zbv_pp4", ScheduleKind::ZeroBubbleV, 4, 2, 1, false, 0, 0, 8},
                      Case{"zbv_pp2_tp2_sp", ScheduleKind::ZeroBubbleV, 2, 2, 2, true},
                      Case{"zbv_pp2_first2_of6", ScheduleKind::ZeroBubbleV, 2, 2, 1, false, 2, 0,
                           6}),
    [](const auto& info) { return std::string(info.param.name); });

// ZB-H1 runs the same GEMMs as 1F1B on the same inputs and sums each weight
// gradient over the micro-batches in the same order (its W's run in
// micro-batch order, as 1F1B's backwards do); only when they run changes.
// So in fp32 its losses, gradients and parameters are 1F1B's bit for bit,
// step after step, with tp (and SP, whose weight pass gathers the norm
// outputs again) and with dp beside it.
class ZeroBubbleExact : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroBubbleExact, BitIdenticalTo1F1B) {
  const Case& c = GetParam();
  if (world().size() % (c.pp * c.tp) != 0 || world().size() < c.pp * c.tp)
    GTEST_SKIP() << "needs a multiple of " << c.pp * c.tp << " ranks";
  comm::Grid& grid = grid_of(c.tp, c.pp);
  Case ob = c;
  ob.kind = ScheduleKind::OneFOneB;
  PipelinedRun zb_run(c, grid), ob_run(ob, grid);
  const size_t n = size_t(zb_run.layout.numel());
  ASSERT_EQ(n, size_t(ob_run.layout.numel()));
  for (int64_t s = 1; s <= 5; ++s) {
    const float zb_loss = zb_run.step(s).loss, ob_loss = ob_run.step(s).loss;
    EXPECT_EQ(zb_loss, ob_loss) << c.name << " step " << s;
    // The step's gradients (before the next step overwrites them) and the
    // parameters the optimizer made of them.
    EXPECT_EQ(0, std::memcmp(zb_run.model.grads().f32(), ob_run.model.grads().f32(), 4 * n))
        << c.name << " gradients differ at step " << s;
    EXPECT_EQ(0, std::memcmp(zb_run.model.params().f32(), ob_run.model.params().f32(), 4 * n))
        << c.name << " parameters differ at step " << s;
  }
  // The split really ran: every rank's list has W's and no unsplit Backward.
  int64_t weights = 0;
  for (const Action& a : zb_run.exec.actions()) {
    EXPECT_NE(a.type, ActionType::Backward);
    weights += a.type == ActionType::BackwardWeight;
  }
  EXPECT_EQ(weights, kM);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ZeroBubbleExact,
    ::testing::Values(Case{"zbh1_pp2", ScheduleKind::ZeroBubbleH1, 2, 1, 1},
                      Case{"zbh1_pp4", ScheduleKind::ZeroBubbleH1, 4, 1, 1},
                      Case{"zbh1_pp2_tp2_sp", ScheduleKind::ZeroBubbleH1, 2, 1, 2, true}),
    [](const auto& info) { return std::string(info.param.name); });

// ZBV against 1F1B. Each layer runs the same GEMMs on the same inputs
// wherever the V puts it, and each chunk's W's run in micro-batch order, so
// every layer's weight gradient is summed in 1F1B's order. The tied token
// table is where the two part: 1F1B sums the embedding's and the head's
// halves on two ranks and adds them at ReduceGrads, ZBV adds both into one
// buffer on rank 0 in the order the list runs them. So an untied model is
// 1F1B's bit for bit (losses, every gradient, every parameter), gathered by
// global name since the layers sit on other ranks; a tied one is not (it
// matches one process to the layout tests' tolerance, Pipeline below).
std::vector<float> whole_model(PipelinedRun& run, const comm::Grid& grid, bool grads) {
  // (model numel) each parameter at its global offset in the one-process
  // layout, from the rank that holds it (one copy of the tied table: the
  // embedding's), summed over the pp group: x + 0 is x, bit for bit.
  const GPTConfig m = run.model.config();
  const ParamLayout one = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  std::vector<float> out(size_t(one.numel()), 0.0f);
  const float* mine = grads ? run.model.grads().f32() : run.model.params().f32();
  for (const ParamEntry& e : run.layout.entries()) {
    if (e.name == "wte" && !run.layout.has_embedding()) continue;
    std::copy_n(mine + e.offset, e.numel(), out.data() + one.find(e.name).offset);
  }
  grid.pp().all_reduce(std::span<float>(out));
  return out;
}

class ZbvExact : public ::testing::TestWithParam<Case> {};

TEST_P(ZbvExact, UntiedBitIdenticalTo1F1B) {
  const Case& c = GetParam();
  if (world().size() % (c.pp * c.tp) != 0 || world().size() < c.pp * c.tp)
    GTEST_SKIP() << "needs a multiple of " << c.pp * c.tp << " ranks";
  comm::Grid& grid = grid_of(c.tp, c.pp);
  Case ob = c;
  ob.kind = ScheduleKind::OneFOneB;
  ob.v = 1;
  PipelinedRun zbv_run(c, grid), ob_run(ob, grid);
  for (int64_t s = 1; s <= 5; ++s) {
    const float zbv_loss = zbv_run.step(s).loss, ob_loss = ob_run.step(s).loss;
    EXPECT_EQ(zbv_loss, ob_loss) << c.name << " step " << s;
    EXPECT_TRUE(whole_model(zbv_run, grid, true) == whole_model(ob_run, grid, true))
        << c.name << " gradients differ at step " << s;
    EXPECT_TRUE(whole_model(zbv_run, grid, false) == whole_model(ob_run, grid, false))
        << c.name << " parameters differ at step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ZbvExact,
    ::testing::Values(Case{"zbv_pp2_untied", ScheduleKind::ZeroBubbleV, 2, 2, 1, false, 0, 0, 4,
                           true},
                      Case{"zbv_pp4_untied", ScheduleKind::ZeroBubbleV, 4, 2, 1, false, 0, 0, 8,
                           true}),
    [](const auto& info) { return std::string(info.param.name); });

struct PipeLayout {
  const char* name;
  int world, tp, pp, v, zero;
  ScheduleKind kind;
  int64_t layers;
  Recompute recompute = Recompute::None;
  bool grad_reduce_bf16 = false;  // --grad-reduce-in-bf16: a bf16-only case
  bool sequence_parallel = false;
  int first = 0, last = 0;  // uneven stages (0: not set)
  bool llama = false;       // the Llama family's tiny model (tiny_training.h) instead of GPT's
  bool overlap_grad_reduce = false;
};

class Pipeline : public ::testing::TestWithParam<PipeLayout> {};

void pipeline_matches_one_process(const PipeLayout& L, float dropout,
                                  Precision precision = Precision::Fp32) {
  // Skipped, not failed: the same binary runs at every rank count CTest
  // registers (singleton, 2, 4, 8); this case runs at the one it names.
  if (world().size() != L.world) GTEST_SKIP() << "runs at " << L.world << " ranks";
  // The bf16 gradient reduction is a --bf16 option: skipped for the other precisions.
  if (L.grad_reduce_bf16 && precision != Precision::Bf16) GTEST_SKIP() << "a --bf16 case";
  comm::Grid& grid = grid_of(L.tp, L.pp);
  const std::vector<StepStats> ref =
      test::single_process_run(20, L.layers, dropout, precision, L.llama);
  TrainConfig c = test::tiny_train_config(L.zero, L.world / (L.tp * L.pp), L.layers, dropout,
                                          precision, L.llama);
  c.grad_reduce_bf16 = L.grad_reduce_bf16;
  c.overlap_grad_reduce = L.overlap_grad_reduce;
  c.par.tp = L.tp;
  c.par.pp = L.pp;
  c.par.virtual_stages = L.v;
  c.par.schedule = L.kind;
  c.par.recompute = L.recompute;
  c.par.sequence_parallel = L.sequence_parallel;
  if (L.first > 0) c.par.first_stage_layers = L.first;
  if (L.last > 0) c.par.last_stage_layers = L.last;
  c.eval_interval = 0;
  c.validate(world().size());
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data, &world(), &grid);
  test::expect_activations_predicted(t, c, grid.coord().tp, grid.coord().pp);
  double worst = 0;
  for (int64_t s = 1; s <= 20; ++s) {
    const StepStats st = t.train_step(s);
    if (precision == Precision::Fp32)
      test::expect_step_matches(st, ref[size_t(s - 1)], s, L.name);
    else
      worst = std::max(worst, test::expect_lowp_step_matches(st, ref[size_t(s - 1)], s, L.name));
    EXPECT_GE(st.idle_fraction, 0.0);
    EXPECT_LT(st.idle_fraction, 1.0);
    // The executor's slots time the model's kernels as the one-rank path
    // does (the metrics' seconds_by_op, planner --validate --by-op).
    EXPECT_GT(st.profile[Op::Gemm], 0.0) << L.name;
    EXPECT_GT(st.profile[Op::LayerNorm], 0.0) << L.name;
    EXPECT_GT(st.profile[Op::Attention], 0.0) << L.name;
  }
  if (precision != Precision::Fp32 && world().rank() == 0)
    fmt::print("[ {} ] {}: max relative loss difference over 20 steps {:.2e}\n",
               precision_name(precision), L.name, worst);
}

TEST_P(Pipeline, TwentyStepsMatchOneProcess) { pipeline_matches_one_process(GetParam(), 0.0f); }
TEST_P(Pipeline, TwentyStepsWithDropoutMatchOneProcess) {
  pipeline_matches_one_process(GetParam(), 0.2f);
}
// 16-bit GEMMs and activations (ln, qkv, attention, fch, GELU outputs),
// with dropout on: every pipeline layout (schedules, recompute, tp +- SP,
// ZeRO 0-3 with 16-bit gathers, 3D at 8 ranks, bf16 gradient reductions)
// equals the one-process bf16 run to 2e-3 relative loss.
TEST_P(Pipeline, TwentyStepsInBf16WithDropoutMatchOneProcess) {
  pipeline_matches_one_process(GetParam(), 0.2f, Precision::Bf16);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Pipeline,
    ::testing::Values(PipeLayout{"pp2_1f1b", 2, 1, 2, 1, 0, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_1f1b_zero1", 2, 1, 2, 1, 1, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_gpipe", 2, 1, 2, 1, 0, ScheduleKind::GPipe, 2},
                      PipeLayout{"pp2_zero2", 2, 1, 2, 1, 2, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_zero3", 2, 1, 2, 1, 3, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_dp2_zero2", 4, 1, 2, 1, 2, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_dp2_zero3_interleaved", 4, 1, 2, 2, 3,
                                 ScheduleKind::Interleaved, 4},
                      PipeLayout{"pp2_tp2_dp2_zero3", 8, 2, 2, 1, 3, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_recompute_selective", 2, 1, 2, 1, 0, ScheduleKind::OneFOneB,
                                 2, Recompute::Selective},
                      PipeLayout{"pp2_recompute_full", 2, 1, 2, 1, 1, ScheduleKind::OneFOneB, 2,
                                 Recompute::Full},
                      PipeLayout{"pp2_tp2_recompute_full", 4, 2, 2, 1, 0,
                                 ScheduleKind::OneFOneB, 2, Recompute::Full},
                      PipeLayout{"pp2_interleaved_v2", 2, 1, 2, 2, 1, ScheduleKind::Interleaved, 4},
                      PipeLayout{"pp4", 4, 1, 4, 1, 0, ScheduleKind::OneFOneB, 4},
                      PipeLayout{"pp2_tp2", 4, 2, 2, 1, 1, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_dp2_zero1", 4, 1, 2, 1, 1, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_tp2_dp2_zero1", 8, 2, 2, 1, 1, ScheduleKind::OneFOneB, 2},
                      PipeLayout{"pp2_tp2_sp_interleaved", 4, 2, 2, 2, 0,
                                 ScheduleKind::Interleaved, 4, Recompute::None, false, true},
                      PipeLayout{"pp2_dp2_zero2_bf16_reduce", 4, 1, 2, 1, 2,
                                 ScheduleKind::OneFOneB, 2, Recompute::None, true},
                      PipeLayout{"pp2_tp2_dp2_zero1_bf16_reduce", 8, 2, 2, 1, 1,
                                 ScheduleKind::OneFOneB, 2, Recompute::Selective, true},
                      PipeLayout{"pp2_tp2_dp2_zero3_bf16_reduce", 8, 2, 2, 1, 3,
                                 ScheduleKind::OneFOneB, 2, Recompute::Full, true},
                      // Uneven stages (--decoder-first/last-pipeline-num-layers).
                      PipeLayout{"pp2_first1_of3_1f1b", 2, 1, 2, 1, 0, ScheduleKind::OneFOneB,
                                 3, Recompute::None, false, false, 1, 0},
                      PipeLayout{"pp2_first1_of3_gpipe", 2, 1, 2, 1, 0, ScheduleKind::GPipe, 3,
                                 Recompute::None, false, false, 1, 0},
                      PipeLayout{"pp2_last1_of3_zero1", 2, 1, 2, 1, 1, ScheduleKind::OneFOneB, 3,
                                 Recompute::None, false, false, 0, 1},
                      PipeLayout{"pp2_first1_of3_zero3_recompute_full", 2, 1, 2, 1, 3,
                                 ScheduleKind::OneFOneB, 3, Recompute::Full, false, false, 1, 0},
                      PipeLayout{"pp2_interleaved_v2_first2_of6", 2, 1, 2, 2, 1,
                                 ScheduleKind::Interleaved, 6, Recompute::None, false, false, 2, 0},
                      PipeLayout{"pp4_first1_last1_of6", 4, 1, 4, 1, 0, ScheduleKind::OneFOneB, 6,
                                 Recompute::None, false, false, 1, 1},
                      PipeLayout{"pp4_first1_last1_of6_gpipe", 4, 1, 4, 1, 1, ScheduleKind::GPipe,
                                 6, Recompute::None, false, false, 1, 1},
                      PipeLayout{"pp2_tp2_last1_of3", 4, 2, 2, 1, 1, ScheduleKind::OneFOneB, 3,
                                 Recompute::Selective, false, true, 0, 1},
                      PipeLayout{"pp2_dp2_zero2_first1_of3", 4, 1, 2, 1, 2,
                                 ScheduleKind::OneFOneB, 3, Recompute::None, false, false, 1, 0},
                      PipeLayout{"pp2_dp2_zero3_first3_of4", 4, 1, 2, 1, 3,
                                 ScheduleKind::OneFOneB, 4, Recompute::None, false, false, 3, 0},
                      PipeLayout{"pp2_tp2_dp2_zero1_first1_of3", 8, 2, 2, 1, 1,
                                 ScheduleKind::OneFOneB, 3, Recompute::None, false, false, 1, 0},
                      // The Llama family (issue 17): untied head (no tied-table sum
                      // between the stages), GQA split over tp, RoPE, SwiGLU, RMSNorm.
                      PipeLayout{"llama_pp2_1f1b", 2, 1, 2, 1, 0, ScheduleKind::OneFOneB, 2,
                                 Recompute::None, false, false, 0, 0, true},
                      PipeLayout{"llama_pp2_zero3_recompute_full", 2, 1, 2, 1, 3,
                                 ScheduleKind::OneFOneB, 2, Recompute::Full, false, false, 0, 0,
                                 true},
                      PipeLayout{"llama_pp2_interleaved_v2_zero1", 2, 1, 2, 2, 1,
                                 ScheduleKind::Interleaved, 4, Recompute::Selective, false, false,
                                 0, 0, true},
                      PipeLayout{"llama_pp2_tp2_sp", 4, 2, 2, 1, 2, ScheduleKind::OneFOneB, 2,
                                 Recompute::Selective, false, true, 0, 0, true},
                      PipeLayout{"llama_pp2_dp2_zero3", 4, 1, 2, 1, 3, ScheduleKind::OneFOneB,
                                 2, Recompute::None, false, false, 0, 0, true},
                      PipeLayout{"llama_pp2_tp2_dp2_zero3_bf16_reduce", 8, 2, 2, 1, 3,
                                 ScheduleKind::OneFOneB, 2, Recompute::Full, true, true, 0, 0,
                                 true},
                      // Zero bubble (issue 36): the trainer's dp reductions wait
                      // for each chunk's last weight pass.
                      PipeLayout{"zbh1_pp2", 2, 1, 2, 1, 0, ScheduleKind::ZeroBubbleH1, 2},
                      PipeLayout{"zbh1_pp2_zero1_first1_of3", 2, 1, 2, 1, 1,
                                 ScheduleKind::ZeroBubbleH1, 3, Recompute::None, false, false, 1,
                                 0},
                      PipeLayout{"zbh1_pp2_dp2", 4, 1, 2, 1, 0, ScheduleKind::ZeroBubbleH1, 2},
                      PipeLayout{"zbh1_pp2_dp2_zero1", 4, 1, 2, 1, 1, ScheduleKind::ZeroBubbleH1,
                                 2},
                      PipeLayout{"zbh1_pp2_tp2_sp", 4, 2, 2, 1, 0, ScheduleKind::ZeroBubbleH1, 2,
                                 Recompute::None, false, true},
                      PipeLayout{"zbh1_pp4", 4, 1, 4, 1, 0, ScheduleKind::ZeroBubbleH1, 4},
                      PipeLayout{"llama_zbh1_pp2_dp2_zero1", 4, 1, 2, 1, 1,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::None, false, false, 0,
                                 0, true},
                      // The weight pass recomputes the layer again.
                      PipeLayout{"zbh1_pp2_recompute_selective", 2, 1, 2, 1, 0,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::Selective},
                      PipeLayout{"zbh1_pp2_recompute_full", 2, 1, 2, 1, 1,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::Full},
                      PipeLayout{"zbh1_pp2_tp2_sp_recompute_full", 4, 2, 2, 1, 0,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::Full, false, true},
                      PipeLayout{"llama_zbh1_pp2_dp2_recompute_selective", 4, 1, 2, 1, 1,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::Selective, false,
                                 false, 0, 0, true},
                      // ZBV: the V placement (rank 0 embeds and computes the loss,
                      // the tied table's gradient summed there), with the trainer's
                      // clipping, dp reductions after each chunk's last W, ZeRO-1,
                      // recompute (again in W), tp + SP, an uneven split, Llama.
                      PipeLayout{"zbv_pp2", 2, 1, 2, 2, 0, ScheduleKind::ZeroBubbleV, 4},
                      PipeLayout{"zbv_pp2_dp2", 4, 1, 2, 2, 0, ScheduleKind::ZeroBubbleV, 4},
                      PipeLayout{"zbv_pp2_dp2_zero1", 4, 1, 2, 2, 1, ScheduleKind::ZeroBubbleV,
                                 4},
                      PipeLayout{"zbv_pp4", 4, 1, 4, 2, 0, ScheduleKind::ZeroBubbleV, 8},
                      PipeLayout{"zbv_pp2_recompute_selective", 2, 1, 2, 2, 0,
                                 ScheduleKind::ZeroBubbleV, 4, Recompute::Selective},
                      PipeLayout{"zbv_pp2_recompute_full", 2, 1, 2, 2, 1,
                                 ScheduleKind::ZeroBubbleV, 4, Recompute::Full},
                      PipeLayout{"zbv_pp2_tp2_sp", 4, 2, 2, 2, 0, ScheduleKind::ZeroBubbleV, 4,
                                 Recompute::None, false, true},
                      PipeLayout{"zbv_pp2_first2_of6", 2, 1, 2, 2, 1, ScheduleKind::ZeroBubbleV,
                                 6, Recompute::None, false, false, 2, 0},
                      PipeLayout{"llama_zbv_pp2_dp2_zero1", 4, 1, 2, 2, 1,
                                 ScheduleKind::ZeroBubbleV, 4, Recompute::None, false, false, 0,
                                 0, true},
                      // ZeRO-2/3 under the split backward: each layer's gradient
                      // reduce-scattered once, after its chunk's last W; ZeRO-3
                      // gathers the weights for F, B and W (again under full
                      // recompute, which W reads them for).
                      PipeLayout{"zbh1_pp2_dp2_zero2", 4, 1, 2, 1, 2, ScheduleKind::ZeroBubbleH1,
                                 2},
                      PipeLayout{"zbh1_pp2_dp2_zero3_overlap", 4, 1, 2, 1, 3,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::None, false, false, 0,
                                 0, false, true},
                      PipeLayout{"zbh1_pp2_dp2_zero3_recompute_full", 4, 1, 2, 1, 3,
                                 ScheduleKind::ZeroBubbleH1, 2, Recompute::Full},
                      PipeLayout{"zbv_pp2_dp2_zero2_overlap", 4, 1, 2, 2, 2,
                                 ScheduleKind::ZeroBubbleV, 4, Recompute::None, false, false, 0,
                                 0, false, true},
                      PipeLayout{"zbv_pp2_dp2_zero3", 4, 1, 2, 2, 3, ScheduleKind::ZeroBubbleV,
                                 4}),
    [](const auto& info) { return std::string(info.param.name); });

// Validation through an uneven pipeline (the evaluator's forward-only
// schedule over the same chunks) equals one process's.
TEST(UnevenEvaluate, ValidationLossMatchesOneProcess) {
  // The mpi binaries run singleton and at 2 and 4 ranks (tests/CMakeLists.txt):
  // a case runs at the rank counts it names and is skipped, by design, at the others.
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  TrainConfig c = test::tiny_train_config(0, 1, 3);
  c.par.pp = 2;
  c.par.first_stage_layers = 1;  // layers 0 | 1-2
  c.eval_interval = 0;
  c.validate(2);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data, &world(), &grid_of(1, 2));
  TrainConfig c1 = test::tiny_train_config(0, 1, 3);
  auto d1 = test::tiny_train_data(c1);
  Trainer one(c1, *d1);
  for (int64_t s = 1; s <= 5; ++s) {
    t.train_step(s);
    one.train_step(s);
  }
  const float got = t.evaluate(), want = one.evaluate();
  EXPECT_LE(rel(got, want), 1e-4) << got << " vs " << want;
}

// Validation through the V (the forward-only list in the V placement: the
// last rank hands each micro-batch from its chunk 0 to its chunk 1 in
// memory, rank 0 computes the loss) equals one process's.
TEST(ZbvEvaluate, ValidationLossMatchesOneProcess) {
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  TrainConfig c = test::tiny_train_config(0, 1, 4);
  c.par.pp = 2;
  c.par.virtual_stages = 2;
  c.par.schedule = ScheduleKind::ZeroBubbleV;
  c.eval_interval = 0;
  c.validate(2);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data, &world(), &grid_of(1, 2));
  TrainConfig c1 = test::tiny_train_config(0, 1, 4);
  auto d1 = test::tiny_train_data(c1);
  Trainer one(c1, *d1);
  for (int64_t s = 1; s <= 5; ++s) {
    t.train_step(s);
    one.train_step(s);
  }
  const float got = t.evaluate(), want = one.evaluate();
  EXPECT_LE(rel(got, want), 1e-4) << got << " vs " << want;
}

// ---- checkpoints across uneven splits -------------------------------------
// A checkpoint names every tensor by its global layer, so a run saved with
// one split resumes under another split or layout: the loaded state is the
// saved one exactly (a round trip through the other layout continues bit
// for bit), and the resumed steps equal the uninterrupted run to the
// layout tests' tolerance.

struct SplitLayout {
  int tp = 1, pp = 2, zero = 0;
  int first = 0, last = 0;  // 0: not set
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int v = 1;
};

TrainConfig split_config(const SplitLayout& s, int64_t layers, const std::string& save_dir) {
  const int64_t dp = world().size() / (s.tp * s.pp);
  TrainConfig c = test::tiny_train_config(s.zero, dp, layers);
  c.par.tp = s.tp;
  c.par.pp = s.pp;
  if (s.first > 0) c.par.first_stage_layers = s.first;
  if (s.last > 0) c.par.last_stage_layers = s.last;
  c.par.schedule = s.kind;
  c.par.virtual_stages = s.v;
  c.eval_interval = 0;
  c.save_dir = save_dir;
  c.validate(world().size());
  return c;
}

std::string scratch_dir(const char* what) {
  // One directory for all ranks: rank 0 names it.
  const float tag =
      world().all_reduce_scalar(world().rank() == 0 ? float(getpid() % 1000000) : 0.0f);
  return (std::filesystem::temp_directory_path() / fmt::format("tessera_{}_{}", what, int64_t(tag)))
      .string();
}

// Steps 1..8 of `from`, saved after step 4 into `dir`.
std::vector<StepStats> run_and_save(const SplitLayout& from, int64_t layers,
                                    const std::string& dir) {
  TrainConfig c = split_config(from, layers, dir);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data, &world(), &grid_of(from.tp, from.pp));
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= 8; ++s) {
    out.push_back(t.train_step(s));
    if (s == 4) t.save(s);
  }
  return out;
}

// Loads step 4 of `dir` into layout `to` and runs steps 5..8; with
// `resave`, saves the loaded state again (step 4) into `resave` first.
std::vector<StepStats> load_and_run(const SplitLayout& to, int64_t layers, const std::string& dir,
                                    const std::string& resave = "") {
  TrainConfig c = split_config(to, layers, resave);
  auto data = test::tiny_train_data(c);
  Trainer t(c, *data, &world(), &grid_of(to.tp, to.pp));
  EXPECT_EQ(t.load(dir), 4);
  if (!resave.empty()) t.save(4);
  std::vector<StepStats> out;
  for (int64_t s = 5; s <= 8; ++s) out.push_back(t.train_step(s));
  return out;
}

void remove_dirs(const std::vector<std::string>& dirs) {
  world().barrier();
  if (world().rank() == 0)
    for (const auto& d : dirs) std::filesystem::remove_all(d);
}

// Steps 1..8 of `from` saved at step 4; `to` resumes it (the continuation
// equals the uninterrupted run to the layout tests' tolerance) and saves
// what it loaded; `from` resumes that bit for bit, so nothing was lost or
// moved on the way through the other layout.
void expect_round_trip(const SplitLayout& from, const SplitLayout& to, const char* dirs,
                       const std::string& what) {
  const std::string a = scratch_dir(fmt::format("{}_a", dirs).c_str()),
                    b = scratch_dir(fmt::format("{}_b", dirs).c_str());
  const std::vector<StepStats> straight = run_and_save(from, 4, a);
  const std::vector<StepStats> resumed = load_and_run(to, 4, a, b);
  for (int64_t s = 5; s <= 8; ++s)
    test::expect_step_matches(resumed[size_t(s - 5)], straight[size_t(s - 1)], s, what);
  const std::vector<StepStats> back = load_and_run(from, 4, b);
  for (int64_t s = 5; s <= 8; ++s) {
    EXPECT_EQ(back[size_t(s - 5)].loss, straight[size_t(s - 1)].loss) << what << " step " << s;
    EXPECT_EQ(back[size_t(s - 5)].grad_norm, straight[size_t(s - 1)].grad_norm)
        << what << " step " << s;
  }
  remove_dirs({a, b});
}

TEST(UnevenCheckpoint, SavedUnevenResumesEvenAndBackExactly) {
  // The mpi binaries run singleton and at 2 and 4 ranks (tests/CMakeLists.txt):
  // a case runs at the rank counts it names and is skipped, by design, at the others.
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  const SplitLayout uneven{1, 2, 0, 1, 0}, even{1, 2, 0, 0, 0};  // layers 0 | 1-3 and 0-1 | 2-3
  expect_round_trip(uneven, even, "uneven", "saved first 1 of 4, resumed even");
}

TEST(UnevenCheckpoint, SavedUnevenResumesUnderOtherLayouts) {
  // The mpi binaries run singleton and at 2 and 4 ranks (tests/CMakeLists.txt):
  // a case runs at the rank counts it names and is skipped, by design, at the others.
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  const SplitLayout first1{1, 2, 0, 1, 0};
  const std::string a = scratch_dir("uneven_c");
  const std::vector<StepStats> straight = run_and_save(first1, 4, a);
  // Another split (3 | 1), data parallel with ZeRO-1 and ZeRO-3, tp 2.
  for (const SplitLayout& to : {SplitLayout{1, 2, 0, 0, 1}, SplitLayout{1, 1, 1, 0, 0},
                                SplitLayout{1, 1, 3, 0, 0}, SplitLayout{2, 1, 0, 0, 0}}) {
    const std::string what = fmt::format("saved first 1 of 4, resumed tp {} pp {} zero {} last {}",
                                         to.tp, to.pp, to.zero, to.last);
    const std::vector<StepStats> resumed = load_and_run(to, 4, a);
    for (int64_t s = 5; s <= 8; ++s)
      test::expect_step_matches(resumed[size_t(s - 5)], straight[size_t(s - 1)], s, what);
  }
  remove_dirs({a});
}

TEST(UnevenCheckpoint, SavedEvenResumesUneven) {
  // The mpi binaries run singleton and at 2 and 4 ranks (tests/CMakeLists.txt):
  // a case runs at the rank counts it names and is skipped, by design, at the others.
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  const SplitLayout even{1, 2, 1, 0, 0}, last1{1, 2, 1, 0, 1};
  const std::string a = scratch_dir("uneven_d");
  const std::vector<StepStats> straight = run_and_save(even, 4, a);
  const std::vector<StepStats> resumed = load_and_run(last1, 4, a);
  for (int64_t s = 5; s <= 8; ++s)
    test::expect_step_matches(resumed[size_t(s - 5)], straight[size_t(s - 1)], s,
                              "saved even, resumed last 1 of 4");
  remove_dirs({a});
}

// ZBV's layer -> rank map differs from 1F1B's (rank 0 holds layers 0 and 3
// of 4, rank 1 layers 1-2, against 0-1 | 2-3): a zbv checkpoint resumes
// under 1f1b, and 1f1b's save of it resumes under zbv again bit for bit.
TEST(ZbvCheckpoint, SavedZbvResumes1F1BAndBackExactly) {
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks";
  const SplitLayout zbv{1, 2, 1, 0, 0, ScheduleKind::ZeroBubbleV, 2}, ob{1, 2, 0};
  expect_round_trip(zbv, ob, "zbv", "saved zbv, resumed 1f1b");
}

}  // namespace
}  // namespace tessera
