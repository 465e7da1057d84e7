// The trainer under every layout, under mpirun: every step's loss equals one
// process training the same global batch — data parallelism with ZeRO 0-3,
// tensor parallelism (with sequence parallelism) x dp, and pipelines (GPipe,
// 1F1B, interleaved) x tp x dp; the memory of each ZeRO stage equals the
// formula exactly; a sharded checkpoint resumes bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/core.h>

#include "mpi_test_env.h"
#include "tessera/comm/grid.h"
#include "tessera/core/rng.h"
#include "tessera/parallel/schedule.h"
#include "tessera/train/sampled_batches.h"
#include "tessera/train/trainer.h"

namespace tessera {
namespace {

using test::world;

TrainConfig tiny_config(int zero_stage, int64_t dp, int64_t layers = 2) {
  TrainConfig c;
  c.model.num_layers = layers;
  c.model.hidden_size = 32;
  c.model.num_heads = 4;
  c.model.seq_length = 16;
  c.model.vocab_size = 67;
  c.par.dp = dp;
  c.par.micro_batch = 2;
  c.par.global_batch = 8;  // dp 2: 2 accumulation steps; dp 4: 1
  c.par.zero_stage = zero_stage;
  c.train_iters = 20;
  c.optim.lr = 5e-3f;
  c.optim.min_lr = 5e-4f;
  c.optim.warmup_iters = 3;
  c.optim.clip_grad = 0.5f;  // clipping engaged: the global norm must be right
  c.peak_tflops = 1;
  c.valid_fraction = 0.1;
  c.eval_iters = 3;
  c.progress = false;
  c.validate(dp);
  return c;
}

std::unique_ptr<SampledBatches> tiny_data(const TrainConfig& c) {
  std::vector<int32_t> tokens(4096);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(rng_u64(42, 0, i) % uint64_t(c.model.vocab_size));
  return std::make_unique<SampledBatches>(memory_token_source(tokens, "random"),
                                          c.model.vocab_size, c.model.seq_length, c.seed,
                                          c.valid_fraction);
}

// The single-process run every layout must reproduce (each rank computes it).
std::vector<StepStats> single_process_run(int64_t steps, int64_t layers = 2) {
  TrainConfig c = tiny_config(0, 1, layers);
  auto data = tiny_data(c);
  Trainer t(c, *data);
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= steps; ++s) out.push_back(t.train_step(s));
  return out;
}

// One grid per shape for the whole binary: groups are registered with the
// watchdog's progress board for the life of the process (64 at most).
comm::Grid& grid_of(int tp, int pp = 1) {
  static std::map<std::pair<int, int>, std::unique_ptr<comm::Grid>> grids;
  auto& g = grids[{tp, pp}];
  if (!g) {
    ParallelConfig par{.tp = tp, .pp = pp};
    par.set_world(world().size());
    g = std::make_unique<comm::Grid>(world(), par);
  }
  return *g;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

class Zero : public ::testing::TestWithParam<int> {};

TEST_P(Zero, TwentyStepsMatchOneProcess) {
  const int stage = GetParam();
  comm::Grid& grid = grid_of(1);
  const std::vector<StepStats> ref = single_process_run(20);
  TrainConfig c = tiny_config(stage, world().size());
  auto data = tiny_data(c);
  Trainer t(c, *data, &world(), &grid);
  for (int64_t s = 1; s <= 20; ++s) {
    StepStats st = t.train_step(s);
    const double tol = s == 1 ? 1e-5 : 1e-4;
    EXPECT_LE(rel(st.loss, ref[size_t(s - 1)].loss), tol)
        << "stage " << stage << " step " << s << ": " << st.loss << " vs " << ref[s - 1].loss;
    EXPECT_LE(rel(st.grad_norm, ref[size_t(s - 1)].grad_norm), s == 1 ? 1e-5 : 1e-3)
        << "stage " << stage << " step " << s;
  }
  // Validation loss: the same fixed set, shared out over the ranks.
  TrainConfig c1 = tiny_config(0, 1);
  auto d1 = tiny_data(c1);
  Trainer one(c1, *d1);
  for (int64_t s = 1; s <= 20; ++s) one.train_step(s);
  EXPECT_LE(rel(t.evaluate(), one.evaluate()), 1e-4);
}

TEST_P(Zero, MemoryEqualsTheFormula) {
  const int stage = GetParam();
  comm::Grid& grid = grid_of(1);
  TrainConfig c = tiny_config(stage, world().size());
  auto data = tiny_data(c);
  Trainer t(c, *data, &world(), &grid);
  const int64_t numel = t.model().layout().numel();
  const MemoryBytes want = zero_state_bytes(double(numel), kFp32AdamBytes, stage, world().size());
  const MemoryBytes got = t.model_state_bytes();
  EXPECT_EQ(got.params, want.params);
  EXPECT_EQ(got.grads, want.grads);
  EXPECT_EQ(got.optimizer, want.optimizer);
  // The paper's 16 bytes per element, divided as the stage divides it.
  const int64_t d = world().size();
  const int64_t per_rank[] = {16 * numel, 8 * numel + 8 * numel / d, 4 * numel + 12 * numel / d,
                              16 * numel / d};
  EXPECT_EQ(got.total(), double(per_rank[stage]));
}

TEST_P(Zero, ShardedCheckpointResumesBitForBit) {
  const int stage = GetParam();
  comm::Grid& grid = grid_of(1);
  // One directory for all ranks: rank 0 names it.
  float tag = world().all_reduce_scalar(world().rank() == 0 ? float(getpid() % 1000000) : 0.0f);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           fmt::format("tessera_zero{}_{}", stage, int64_t(tag)))
                              .string();
  TrainConfig c = tiny_config(stage, world().size());
  c.save_dir = dir;
  auto data = tiny_data(c);
  std::vector<StepStats> straight;
  {
    Trainer t(c, *data, &world(), &grid);
    for (int64_t s = 1; s <= 8; ++s) {
      straight.push_back(t.train_step(s));
      if (s == 4) t.save(s);
    }
  }
  Trainer resumed(c, *data, &world(), &grid);
  ASSERT_EQ(resumed.load(dir), 4);
  for (int64_t s = 5; s <= 8; ++s) {
    StepStats st = resumed.train_step(s);
    EXPECT_EQ(st.loss, straight[size_t(s - 1)].loss) << "step " << s;  // bit for bit
    EXPECT_EQ(st.grad_norm, straight[size_t(s - 1)].grad_norm) << "step " << s;
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

// Tensor parallelism inside the trainer: tp 2 over the world's ranks (x dp 2
// on 4 ranks), with each ZeRO stage and with sequence parallelism.
class TensorAndData : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(TensorAndData, TwentyStepsMatchOneProcess) {
  const auto [stage, sp] = GetParam();
  // Skipped, not failed: the same binary runs at every rank count CTest
  // registers (singleton, 2, 4, 8); this case runs at the one it names.
  if (world().size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks for tp 2";
  comm::Grid& grid = grid_of(2);
  const std::vector<StepStats> ref = single_process_run(20);
  TrainConfig c = tiny_config(stage, world().size() / 2);
  c.par.tp = 2;
  c.par.sequence_parallel = sp;
  c.validate(world().size());
  auto data = tiny_data(c);
  Trainer t(c, *data, &world(), &grid);
  for (int64_t s = 1; s <= 20; ++s) {
    StepStats st = t.train_step(s);
    EXPECT_LE(rel(st.loss, ref[size_t(s - 1)].loss), s == 1 ? 1e-5 : 1e-4)
        << "zero " << stage << " sp " << sp << " step " << s;
    EXPECT_LE(rel(st.grad_norm, ref[size_t(s - 1)].grad_norm), s == 1 ? 1e-5 : 1e-3)
        << "zero " << stage << " sp " << sp << " step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TensorAndData,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "zero" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp" : "");
                         });

struct PipeLayout {
  const char* name;
  int world, tp, pp, v, zero;
  ScheduleKind kind;
  int64_t layers;
  Recompute recompute = Recompute::None;
};

class Pipeline : public ::testing::TestWithParam<PipeLayout> {};

TEST_P(Pipeline, TwentyStepsMatchOneProcess) {
  const PipeLayout L = GetParam();
  // Skipped, not failed: the same binary runs at every rank count CTest
  // registers (singleton, 2, 4, 8); this case runs at the one it names.
  if (world().size() != L.world) GTEST_SKIP() << "runs at " << L.world << " ranks";
  comm::Grid& grid = grid_of(L.tp, L.pp);
  const std::vector<StepStats> ref = single_process_run(20, L.layers);
  TrainConfig c = tiny_config(L.zero, L.world / (L.tp * L.pp), L.layers);
  c.par.tp = L.tp;
  c.par.pp = L.pp;
  c.par.virtual_stages = L.v;
  c.par.schedule = L.kind;
  c.par.recompute = L.recompute;
  c.eval_interval = 0;
  c.validate(world().size());
  auto data = tiny_data(c);
  Trainer t(c, *data, &world(), &grid);
  for (int64_t s = 1; s <= 20; ++s) {
    StepStats st = t.train_step(s);
    EXPECT_LE(rel(st.loss, ref[size_t(s - 1)].loss), s == 1 ? 1e-5 : 1e-4)
        << L.name << " step " << s << ": " << st.loss << " vs " << ref[size_t(s - 1)].loss;
    EXPECT_LE(rel(st.grad_norm, ref[size_t(s - 1)].grad_norm), s == 1 ? 1e-5 : 1e-3)
        << L.name << " step " << s;
    EXPECT_GE(st.idle_fraction, 0.0);
    EXPECT_LT(st.idle_fraction, 1.0);
    // The executor's slots time the model's kernels as the one-rank path
    // does (the metrics' seconds_by_op, planner --validate --by-op).
    EXPECT_GT(st.profile[Op::Gemm], 0.0) << L.name;
    EXPECT_GT(st.profile[Op::LayerNorm], 0.0) << L.name;
    EXPECT_GT(st.profile[Op::Attention], 0.0) << L.name;
  }
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
                      PipeLayout{"pp2_tp2_dp2_zero1", 8, 2, 2, 1, 1, ScheduleKind::OneFOneB, 2}),
    [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Stages, Zero, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

}  // namespace
}  // namespace tessera
