// The trainer under context parallelism (docs/context_parallel.md), under
// mpirun: cp 2 over the world's ranks (2 ranks: cp 2; 4 ranks: cp 2 x dp 2,
// ZeRO 0 and 3, cp 2 x tp 2 with and without SP, cp 2 x pp 2 under 1f1b,
// interleaved, zb-h1 and zbv; 8 ranks: cp 2 x tp 2 + SP x pp 2) trains 512-token sequences exactly as one process does on
// the same global batch: step 1's loss and gradient norm to 1e-5
// relative, step 10's to 1e-4 (the norm to 1e-3, as every layout test),
// GPT-2 and Llama blocks, with dropout, p2p and all_gather, recomputation;
// bf16 to the bf16 layout tests' 2e-3. The validation loss too. A
// checkpoint saved at cp 2 resumes at cp 1 and the other way round.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "mpi_test_env.h"
#include "rel.h"
#include "tiny_training.h"

namespace tessera {
namespace {

using test::rel;
using test::world;

constexpr int64_t kSeq = 512;

// The tiny run at 512 tokens; cp x tp x pp ranks of the world (dp the rest).
TrainConfig cp_config(int64_t cp, int zero, float dropout, Precision precision, bool llama,
                      int64_t world_size, int64_t tp = 1, int64_t pp = 1, int64_t layers = 2) {
  TrainConfig c = test::tiny_train_config(zero, 1, layers, dropout, precision, llama);
  c.model.seq_length = kSeq;
  c.par.cp = cp;
  c.par.tp = tp;
  c.par.pp = pp;
  c.par.dp = world_size / (cp * tp * pp);
  c.par.micro_batch = 1;
  c.par.global_batch = 2;  // dp 1: 2 accumulation steps (pp 2: 2 micro-batches); dp 2: 1
  c.train_iters = 10;
  c.validate(world_size);
  return c;
}

std::unique_ptr<SampledBatches> cp_data(const TrainConfig& c) {
  return test::tiny_train_data(c, 32768);  // room for 512-token windows in both splits
}

// The grid of cp 2 (x tp x pp) over the world, each built once (the
// progress board keeps every group for the life of the process).
comm::Grid& cp_grid(int tp = 1, int pp = 1) {
  static std::map<std::pair<int, int>, std::unique_ptr<comm::Grid>> grids;
  auto& g = grids[{tp, pp}];
  if (!g) {
    ParallelConfig par;
    par.cp = 2;
    par.tp = tp;
    par.pp = pp;
    par.set_world(world().size());
    g = std::make_unique<comm::Grid>(world(), par);
  }
  return *g;
}

// The same run in one process (cp, tp, pp, dp 1, no ZeRO).
TrainConfig one_process_config(const TrainConfig& par_cfg) {
  TrainConfig c = par_cfg;
  c.par.cp = 1;
  c.par.tp = 1;
  c.par.pp = 1;
  c.par.dp = 1;
  c.par.zero_stage = 0;
  c.par.schedule = ScheduleKind::OneFOneB;
  c.par.virtual_stages = 1;
  c.validate(1);
  return c;
}

std::vector<StepStats> one_process(const TrainConfig& par_cfg, int64_t steps) {
  const TrainConfig c = one_process_config(par_cfg);
  auto data = cp_data(c);
  Trainer t(c, *data);
  std::vector<StepStats> out;
  for (int64_t s = 1; s <= steps; ++s) out.push_back(t.train_step(s));
  return out;
}

struct CpCase {
  bool llama = false;
  float dropout = 0.0f;
  CpCommType comm = CpCommType::P2p;
  Recompute recompute = Recompute::None;
  Precision precision = Precision::Fp32;
  int zero = 0;
  int tp = 1, pp = 1;
  bool sp = false;  // --sequence-parallel (with tp)
  ScheduleKind schedule = ScheduleKind::OneFOneB;  // with pp > 1
  int vp = 1;       // --virtual-pipeline-stages (interleaved, zbv: 2)
  int layers = 2;   // interleaved and zbv: 4, a layer per model chunk and more
};

void cp_matches_one_process(const CpCase& k) {
  const int ranks = 2 * k.tp * k.pp;
  if (world().size() % ranks != 0)
    GTEST_SKIP() << "needs a multiple of " << ranks << " ranks";
  TrainConfig c =
      cp_config(2, k.zero, k.dropout, k.precision, k.llama, world().size(), k.tp, k.pp, k.layers);
  c.par.cp_comm = k.comm;
  c.par.schedule = k.schedule;
  c.par.virtual_stages = k.vp;
  c.par.recompute = k.recompute;
  c.par.sequence_parallel = k.sp;
  c.validate(world().size());
  const std::vector<StepStats> ref = one_process(c, c.train_iters);
  auto data = cp_data(c);
  Trainer t(c, *data, &world(), &cp_grid(k.tp, k.pp));
  const std::string what = fmt::format(
      "{} cp 2 tp {}{} pp {} {} vp {} dp {} zero {} dropout {} {} recompute {} {}",
      k.llama ? "llama" : "gpt", k.tp, k.sp ? " sp" : "", k.pp, schedule_kind_name(k.schedule), k.vp, c.par.dp, k.zero, k.dropout, cp_comm_name(k.comm),
      recompute_name(k.recompute), precision_name(k.precision));
  for (int64_t s = 1; s <= c.train_iters; ++s) {
    const StepStats got = t.train_step(s);
    if (k.precision == Precision::Fp32)
      test::expect_step_matches(got, ref[size_t(s - 1)], s, what);
    else
      test::expect_lowp_step_matches(got, ref[size_t(s - 1)], s, what);
    // The ring's traffic is counted with the step's other collectives.
    EXPECT_GT(test::step_comm_bytes(got, "cp", k.comm == CpCommType::P2p ? "send" : "all_gather"),
              0.0)
        << what;
  }
}

TEST(ContextParallelTrainer, GptMatchesOneProcess) { cp_matches_one_process({}); }
TEST(ContextParallelTrainer, GptWithDropoutMatchesOneProcess) {
  cp_matches_one_process({.dropout = 0.1f});
}
TEST(ContextParallelTrainer, LlamaWithDropoutMatchesOneProcess) {
  cp_matches_one_process({.llama = true, .dropout = 0.1f});
}
TEST(ContextParallelTrainer, AllGatherMatchesOneProcess) {
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .comm = CpCommType::AllGather});
}
TEST(ContextParallelTrainer, Zero3MatchesOneProcess) {
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .zero = 3});
}
TEST(ContextParallelTrainer, RecomputeMatchesOneProcess) {
  cp_matches_one_process({.dropout = 0.1f, .recompute = Recompute::Full});
  cp_matches_one_process({.llama = true, .recompute = Recompute::Selective});
}
TEST(ContextParallelTrainer, Bf16MatchesOneProcessInBf16) {
  cp_matches_one_process({.llama = true, .precision = Precision::Bf16});
}
TEST(ContextParallelTrainer, Fp16MatchesOneProcessInFp16) {
  cp_matches_one_process({.precision = Precision::Fp16});
}
// 4 ranks: cp 2 x tp 2 (no SP), cp 2 x pp 2 (1f1b).
TEST(ContextParallelTrainer, TensorParallelMatchesOneProcess) {
  cp_matches_one_process({.dropout = 0.1f, .tp = 2});
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .tp = 2});
}
// cp 2 x tp 2 with SP: each tp rank holds half of its cp rank's rows outside
// attention and the MLP (an SP block of the two chunks: positions and
// dropout keys run by run); GPT-2 (learned positions) and Llama (GQA, RoPE).
TEST(ContextParallelTrainer, SequenceParallelMatchesOneProcess) {
  cp_matches_one_process({.dropout = 0.1f, .tp = 2, .sp = true});
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .tp = 2, .sp = true});
}
TEST(ContextParallelTrainer, PipelineMatchesOneProcess) {
  cp_matches_one_process({.dropout = 0.1f, .pp = 2});
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .pp = 2});
}
// 8 ranks (oversubscribed; CTest runs this case alone at 8): cp 2 x tp 2
// with SP x pp 2, every part of the layout at once: the SP blocks of the
// cp chunks cross the pipeline's stage boundary as (B T / (cp tp), C) rows.
TEST(ContextParallelTrainer, SequenceParallelPipelineMatchesOneProcess) {
  if (world().size() != 8) GTEST_SKIP() << "runs at 8 ranks (cp 2 x tp 2 x pp 2)";
  cp_matches_one_process({.dropout = 0.1f, .tp = 2, .pp = 2, .sp = true});
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .tp = 2, .pp = 2, .sp = true});
}
// cp 2 x pp 2 under the schedules that reorder the passes: interleaved and
// zbv hold two model chunks a rank (4 layers), zb-h1 and zbv split the
// backward into an input pass (the ring's dQ and dK/dV) and a weight pass.
TEST(ContextParallelTrainer, PipelineSchedulesMatchOneProcess) {
  cp_matches_one_process(
      {.dropout = 0.1f, .pp = 2, .schedule = ScheduleKind::Interleaved, .vp = 2, .layers = 4});
  cp_matches_one_process({.dropout = 0.1f, .pp = 2, .schedule = ScheduleKind::ZeroBubbleH1});
  cp_matches_one_process({.llama = true, .dropout = 0.1f, .pp = 2, .schedule = ScheduleKind::ZeroBubbleH1});
  cp_matches_one_process(
      {.llama = true, .dropout = 0.1f, .pp = 2, .schedule = ScheduleKind::ZeroBubbleV, .vp = 2, .layers = 4});
}

// The validation loss sees whole sequences: each rank's mean over its rows,
// averaged over cp, is the single process's mean.
TEST(ContextParallelTrainer, ValidationLossMatchesOneProcess) {
  if (world().size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks for cp 2";
  const TrainConfig c = cp_config(2, 0, 0.0f, Precision::Fp32, true, world().size());
  const TrainConfig c1 = one_process_config(c);
  auto data = cp_data(c);
  Trainer t(c, *data, &world(), &cp_grid());
  Trainer one(c1, *data);
  for (int64_t s = 1; s <= 3; ++s) {
    t.train_step(s);
    one.train_step(s);
  }
  EXPECT_LE(rel(t.evaluate(), one.evaluate()), 1e-5);
}

// Activations are those of T / cp rows: the arena holds about half of one
// process's (attention's lse and the row buffers all halve; the logits too).
TEST(ContextParallelTrainer, ActivationsHoldTheLocalRows) {
  if (world().size() % 2 != 0) GTEST_SKIP() << "needs an even number of ranks for cp 2";
  const TrainConfig c = cp_config(2, 0, 0.0f, Precision::Fp32, false, world().size());
  const TrainConfig c1 = one_process_config(c);
  auto data = cp_data(c);
  Trainer t(c, *data, &world(), &cp_grid());
  Trainer one(c1, *data);
  const double ratio = double(t.activation_bytes()) / double(one.activation_bytes());
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.55);
  // The metrics header's activation memory is the arena plus the ring's
  // scratch, allocated up front (p2p, fp32: two K/V blocks and three dK/dV
  // blocks of B x T/cp rows, dq and D), as the planner counts it; one
  // process has no ring.
  const int64_t rows = kSeq / 2, kv = 2 * c.model.kv_heads() * c.model.head_size();
  const int64_t scratch = 4 * (5 * rows * kv + rows * c.model.num_heads * (c.model.head_size() + 1));
  EXPECT_EQ(t.memory_by_rank()[size_t(world().rank())].activations,
            double(t.activation_bytes() + scratch));
  EXPECT_EQ(one.memory_by_rank()[0].activations, double(one.activation_bytes()));
  // The header names cp, so that `tessera plan --validate` predicts the
  // layout that ran (one process: absent, cp 1).
  const nlohmann::json header = t.run_header();  // collective
  EXPECT_EQ(header["run"]["parallel"].value("cp", 0), 2);
  EXPECT_EQ(header["run"]["parallel"].value("cp_comm", std::string()), "p2p");
  EXPECT_FALSE(one.run_header()["run"]["parallel"].contains("cp"));
}

// A checkpoint written at cp 2 resumes in one process (cp 1), and one
// written by one process resumes at cp 2: parameters and optimizer state
// are replicated over cp like over dp (ZeRO shards over dp x cp), so the
// resumed steps follow the uninterrupted run.
TEST(ContextParallelTrainer, CheckpointsReshardAcrossCp) {
  if (world().size() != 2) GTEST_SKIP() << "runs at 2 ranks (cp 2 against one process)";
  for (int zero : {0, 1}) {
    SCOPED_TRACE(fmt::format("zero {}", zero));
    float tag = world().all_reduce_scalar(world().rank() == 0 ? float(getpid() % 1000000) : 0.0f);
    const std::string dir = (std::filesystem::temp_directory_path() /
                             fmt::format("tessera_cp_ckpt_{}_{}", int64_t(tag), zero))
                                .string();
    TrainConfig c = cp_config(2, zero, 0.0f, Precision::Fp32, true, 2);
    c.save_dir = dir + "/cp2";
    const TrainConfig c1 = one_process_config(c);
    auto data = cp_data(c);
    const std::vector<StepStats> straight = one_process(c, 6);
    {
      Trainer t(c, *data, &world(), &cp_grid());
      for (int64_t s = 1; s <= 3; ++s) t.train_step(s);
      t.save(3);
    }
    world().barrier();
    {  // cp 2 -> cp 1, on each rank (no rank waits alone in a collective)
      Trainer one(c1, *data);
      ASSERT_EQ(one.load(c.save_dir), 3);
      for (int64_t s = 4; s <= 6; ++s)
        test::expect_step_matches(one.train_step(s), straight[size_t(s - 1)], s, "cp 2 -> 1");
    }
    {  // one process writes its own at step 3 for the way back (each rank a directory)
      TrainConfig w1 = c1;
      w1.save_dir = fmt::format("{}/cp1_rank{}", dir, world().rank());
      Trainer w(w1, *data);
      for (int64_t s = 1; s <= 3; ++s) w.train_step(s);
      w.save(3);
    }
    world().barrier();
    Trainer back(c, *data, &world(), &cp_grid());  // cp 1 -> cp 2
    ASSERT_EQ(back.load(dir + "/cp1_rank0"), 3);
    for (int64_t s = 4; s <= 6; ++s)
      test::expect_step_matches(back.train_step(s), straight[size_t(s - 1)], s, "cp 1 -> 2");
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace tessera
