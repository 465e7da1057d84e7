// Context parallelism as a field of the engine's layouts (issue 36): a cp
// layout that `plan --emit-config` writes reads back through train's own
// --config parser as the same layout; tune's trial key, trial flags and
// trial log line tell cp 1 from cp 2 (and a line without cp, as every log
// before it, reads as cp 1); a metrics header holds cp only where it is > 1;
// and a search of the engine's runs offers cp from 16k tokens but never a
// layout `tessera train` refuses.
#include <gtest/gtest.h>

#include <string>

#include "../plan/temp_file.h"
#include "tessera/bridge/run_plan.h"
#include "tessera/cli/train_run.h"
#include "tessera/config/config_json.h"
#include "tessera/plan/search.h"
#include "tessera/plan/system.h"
#include "tessera/tune/tune_model.h"
#include "tessera/tune/tune_trial.h"
#include "tiny_model.h"

using namespace tessera;

namespace {

// tp 1 x cp 2 x pp 2 (GPipe), one data-parallel rank: 4 ranks.
plan::PlanLayout cp_layout(int64_t cp, CpCommType comm = CpCommType::P2p) {
  plan::PlanLayout L;
  L.par.cp = cp;
  L.par.cp_comm = comm;
  L.par.pp = 2;
  L.par.dp = 2 / cp;
  L.par.micro_batch = 1;
  L.par.global_batch = 4;
  L.par.schedule = ScheduleKind::GPipe;
  L.precision = Precision::Fp32;
  L.engine = true;
  L.flash_attention = true;
  return L;
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(TuneContextParallel, EmittedConfigReadsBackThroughTrainsParser) {
  const GPTConfig m = test::tiny_llama(4);
  for (CpCommType comm : {CpCommType::P2p, CpCommType::AllGather}) {
    const plan::PlanLayout L = cp_layout(2, comm);
    bridge::TrainKeys keys = bridge::model_keys(m);
    for (const bridge::TrainKey& k : bridge::layout_keys(L)) keys.push_back(k);
    const std::string text = bridge::train_config_toml(keys, "emitted");
    EXPECT_TRUE(has(text, "context-parallel-size = 2\n")) << text;
    EXPECT_TRUE(has(text, std::string("cp-comm-type = \"") + cp_comm_name(comm) + "\"\n")) << text;
    EXPECT_TRUE(has(bridge::train_command(keys), "--context-parallel-size 2")) << text;
    int64_t vocab = 0;
    TrainConfig run = cli::read_train_config(
        write_temp(std::string("cp_emitted_") + cp_comm_name(comm) + ".toml", text), &vocab);
    EXPECT_EQ(run.par.cp, 2);
    EXPECT_EQ(run.par.cp_comm, comm);
    run.par.set_world(4);
    EXPECT_EQ(bridge::layout_of_run(run).str(), L.str());
    run.model.vocab_size = 256;  // the data's, at train time
    EXPECT_NO_THROW(run.validate(4)) << "train refuses the emitted layout " << L.str();
  }
  // cp 1 writes no cp key: every earlier emitted file reads the same.
  const std::string plain = bridge::train_config_toml(bridge::layout_keys(cp_layout(1)), "");
  EXPECT_FALSE(has(plain, "context-parallel")) << plain;
  EXPECT_FALSE(has(plain, "cp-comm-type")) << plain;
}

TEST(TuneContextParallel, TrialKeyFlagsAndLogTellCpOneFromTwo) {
  const plan::PlanLayout one = cp_layout(1), two = cp_layout(2);
  EXPECT_NE(one.str(), two.str());
  EXPECT_TRUE(has(two.str(), "cp 2")) << two.str();
  EXPECT_FALSE(has(tune::layout_flags(one), "context-parallel")) << tune::layout_flags(one);
  EXPECT_TRUE(has(tune::layout_flags(two), "--context-parallel-size 2 --cp-comm-type p2p"))
      << tune::layout_flags(two);
  // --include's parse: the same layout, dp = ranks / (tp x cp x pp).
  plan::PlanLayout base;
  base.par.global_batch = 4;
  base.engine = base.flash_attention = true;
  const plan::PlanLayout back = tune::parse_layout_flags(tune::layout_flags(two), 4, base);
  EXPECT_EQ(back.par.dp, 1);
  EXPECT_EQ(back.str(), two.str());
  EXPECT_EQ(tune::parse_layout_flags("--context-parallel-size 3", 4, base).par.dp, 0);

  // The log line: cp where it is > 1, read back as written; a line without
  // it (cp 1, or any log from before) reads as cp 1.
  tune::Trial t;
  t.index = 1;
  t.status = "ok";
  t.layout = cp_layout(2, CpCommType::AllGather);
  const nlohmann::json j2 = tune::trial_to_json(t);
  EXPECT_EQ(j2.at("cp"), 2);
  EXPECT_EQ(j2.at("cp_comm"), "all_gather");
  EXPECT_EQ(tune::trial_from_json(j2, "line 1").layout.str(), t.layout.str());
  t.layout = one;
  const nlohmann::json j1 = tune::trial_to_json(t);
  EXPECT_FALSE(j1.contains("cp")) << j1.dump();
  const tune::Trial back1 = tune::trial_from_json(j1, "line 1");
  EXPECT_EQ(back1.layout.par.cp, 1);
  EXPECT_EQ(back1.layout.str(), one.str());

  // A cp 2 layout is a new family to a cp 1 trial of the same tp and pp.
  tune::Trial tried = back1;
  EXPECT_DOUBLE_EQ(tune::novelty(two, {tried}), 1.0);
  EXPECT_DOUBLE_EQ(tune::novelty(one, {tried}), 0.25);
}

TEST(TuneContextParallel, MetricsHeaderHoldsCpOnlyAboveOne) {
  ParallelConfig p = cp_layout(2, CpCommType::AllGather).par;
  const nlohmann::json j = parallel_to_json(p);
  EXPECT_EQ(j.at("cp"), 2);
  EXPECT_EQ(j.at("cp_comm"), "all_gather");
  const ParallelConfig back = parallel_from_json(j);
  EXPECT_EQ(back.cp, 2);
  EXPECT_EQ(back.cp_comm, CpCommType::AllGather);
  p.cp = 1;
  EXPECT_FALSE(parallel_to_json(p).contains("cp"));
  EXPECT_FALSE(parallel_to_json(p).contains("cp_comm"));
}

// Every layout of a search of the engine's runs, as train's config.
void expect_train_takes_all(const std::vector<plan::PlanLayout>& layouts, const GPTConfig& m,
                            int64_t world) {
  for (const plan::PlanLayout& L : layouts) {
    TrainConfig c = bridge::run_of_layout(L);
    c.model = m;
    try {
      c.validate(world);
    } catch (const Error& e) {
      ADD_FAILURE() << "the search offers " << L.str() << ", which train refuses: " << e.what();
      return;
    }
  }
}

TEST(TuneContextParallel, EngineSearchOffersCpButNoLayoutTrainRefuses) {
  GPTConfig m = test::tiny_llama(4);
  m.seq_length = plan::kCpSearchMinSeq;
  const plan::SystemSpec sys = plan::load_system("h100");
  plan::SearchSpace sp;
  sp.devices = 4;
  sp.global_batch = 4;
  sp.engine = true;
  sp.precision = Precision::Fp32;
  const std::vector<plan::PlanLayout> engine = plan::enumerate_layouts(m, sys, sp);
  int64_t with_cp = 0, cp_reordered = 0;
  for (const plan::PlanLayout& L : engine) {
    with_cp += L.par.cp > 1;
    // cp under the schedules that reorder the passes (interleaved, zb-h1, zbv) runs too.
    cp_reordered += L.par.cp > 1 && L.par.pp > 1 && L.par.schedule != ScheduleKind::OneFOneB &&
                    L.par.schedule != ScheduleKind::GPipe;
  }
  EXPECT_GT(with_cp, 0) << "the engine search offers no cp at " << m.seq_length << " tokens";
  EXPECT_GT(cp_reordered, 0) << "the engine search offers cp only with 1f1b and gpipe";
  expect_train_takes_all(engine, m, 4);
  // The planner's own search (Megatron's runs) still prices cp with
  // sequence parallelism and the interleaved schedule.
  sp.engine = false;
  bool sp_cp = false, interleaved_cp = false;
  for (const plan::PlanLayout& L : plan::enumerate_layouts(m, sys, sp)) {
    sp_cp = sp_cp || (L.par.cp > 1 && L.par.sequence_parallel);
    interleaved_cp = interleaved_cp || (L.par.cp > 1 && L.par.schedule == ScheduleKind::Interleaved);
  }
  EXPECT_TRUE(sp_cp && interleaved_cp);
  // An MoE model: no cp in the engine's runs (train refuses it).
  GPTConfig moe = m;
  moe.num_experts = 4;
  moe.moe_router_topk = 2;
  sp.engine = true;
  const std::vector<plan::PlanLayout> moe_layouts = plan::enumerate_layouts(moe, sys, sp);
  EXPECT_FALSE(moe_layouts.empty());
  for (const plan::PlanLayout& L : moe_layouts) EXPECT_EQ(L.par.cp, 1) << L.str();
  expect_train_takes_all(moe_layouts, moe, 4);
}

}  // namespace
