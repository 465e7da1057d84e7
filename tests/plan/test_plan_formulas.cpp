// The planner's formulas against published values and against the engine's
// own code (parameter layout, FLOPs, schedules).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tessera/model/flops.h"
#include "tessera/model/param_layout.h"
#include "tessera/parallel/schedule.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/memory_model.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/pipeline_time.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Korthikanti et al. 2022, Table 5 layouts: TP 8, sequence 2048.
struct Table5Row {
  const char* preset;
  int64_t pp, v, micro_batch, micro_batches;
  double no_recompute_gib, sp_selective_gib;  // Figure 1
};

const Table5Row kTable5[] = {
    {"mt-22b", 1, 1, 4, 1, 59.25, 9.56},
    {"mt-175b", 8, 3, 1, 64, 66.84, 12.35},
    {"mt-530b", 35, 3, 1, 70, 114.02, 23.08},
    {"mt-1t", 64, 1, 1, 128, 131.25, 26.56},
};

PlanLayout table5_layout(const Table5Row& r, bool sp, Recompute rc) {
  PlanLayout L;
  L.par.tp = 8;
  L.par.pp = r.pp;
  L.par.dp = 1;
  L.par.virtual_stages = r.v;
  L.par.micro_batch = r.micro_batch;
  L.par.global_batch = r.micro_batch * r.micro_batches;
  L.par.sequence_parallel = sp;
  L.par.recompute = rc;
  L.par.schedule = r.v > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
  L.flash_attention = false;  // the paper stores the attention scores
  return L;
}

}  // namespace

TEST(PlanFormulas, KorthikantiFigure1FirstStageActivations) {
  for (const auto& r : kTable5) {
    GPTConfig m = load_model(r.preset);
    double none = stage_activations(m, table5_layout(r, false, Recompute::None), 0).layers;
    double sel = stage_activations(m, table5_layout(r, true, Recompute::Selective), 0).layers;
    EXPECT_NEAR(none / kGiB, r.no_recompute_gib, 0.01) << r.preset;
    EXPECT_NEAR(sel / kGiB, r.sp_selective_gib, 0.01) << r.preset;
  }
}

TEST(PlanFormulas, KorthikantiPerLayerTerms) {
  GPTConfig m = load_model("mt-22b");
  const double sbh = 2048.0 * 1 * 6144;
  const double as_h = 5.0 * 64 * 2048 / 6144;
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 1, false, Recompute::None, false), sbh * (34 + as_h));
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, true, Recompute::None, false), sbh / 8 * (34 + as_h));
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, false, Recompute::Selective, false),
                   sbh * (10 + 24.0 / 8));
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, false, Recompute::Full, false), 2 * sbh);
  // Flash attention keeps no score matrices: the same as selective.
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(m, 1, 8, true, Recompute::None, true), sbh / 8 * 34);
}

TEST(PlanFormulas, ZeroPaperSevenPointFiveBOn64Gpus) {
  // Rajbhandari et al. 2020, Figure 1: Psi = 7.5B, K = 12, Nd = 64, fp16
  // parameters and gradients (2 + 2 bytes).
  const double expected_gb[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    double bytes = zero_state_bytes(7.5e9, state_bytes_per_param(Precision::Fp16), stage, 64).total();
    EXPECT_NEAR(bytes / 1e9, expected_gb[stage], 0.05) << "ZeRO stage " << stage;
  }
  MemoryBytes fp32 = zero_state_bytes(1.0, state_bytes_per_param(Precision::Fp32), 0, 1);
  EXPECT_DOUBLE_EQ(fp32.total(), 16.0);
}

TEST(PlanFormulas, MegatronFlopsFormulaEqualsEngine) {
  // Narayanan et al. 2021, eq. (3): 72 B s L h^2 (1 + s/6h + V/12Lh) per
  // step; 96 B s L h^2 (1 + s/6h + V/16Lh) with full recomputation.
  for (const char* name : {"frontier-22b", "frontier-175b", "frontier-1t", "gpt2-small"}) {
    GPTConfig m = load_model(name);
    const double B = 64, s = double(m.seq_length), L = double(m.num_layers);
    const double h = double(m.hidden_size), V = double(m.vocab_size);
    const double model = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    const double full = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
    EXPECT_NEAR(step_flops(m, 64, Recompute::None).model / model, 1.0, 1e-12) << name;
    EXPECT_NEAR(step_flops(m, 64, Recompute::Full).hardware / full, 1.0, 1e-12) << name;
  }
}

TEST(PlanFormulas, ParamCountsOfEveryPresetMatchTheEngine) {
  for (const auto& preset : model_presets()) {
    const GPTConfig& m = preset.config;
    ParamCounter counter(m);
    const int64_t engine = ParamLayout::count_model_params(m);
    EXPECT_EQ(counter.model_params(), engine) << preset.name;
    // Summing the planner's per-stage counts gives the same model, less the
    // vocabulary padding (of the token table, and of an untied lm_head) and
    // the last stage's tied copy of the embedding.
    const int64_t tables = m.untie_embeddings ? 2 : 1;
    const int64_t padding = tables * (m.padded_vocab() - m.vocab_size) * m.hidden_size;
    for (int64_t pp : {int64_t(1), int64_t(2), int64_t(4)}) {
      if (m.num_layers % pp != 0) continue;
      ParallelConfig par;
      par.pp = pp;
      int64_t sum = 0;
      for (int64_t s = 0; s < pp; ++s) sum += counter.stage_params(par, s);
      const int64_t tied_copy = pp > 1 && !m.untie_embeddings ? m.padded_vocab() * m.hidden_size : 0;
      EXPECT_EQ(sum - padding - tied_copy, engine) << preset.name << " pp " << pp;
    }
  }
  // Published sizes: GPT-2 small 124M, GPT-3 175B.
  EXPECT_EQ(ParamLayout::count_model_params(load_model("gpt2-small")), 124439808);
  EXPECT_NEAR(double(ParamLayout::count_model_params(load_model("gpt3-175b"))) / 1e9, 175.0, 0.5);
}

TEST(PlanFormulas, InFlightClosedFormsMatchTheEngineSchedules) {
  for (int64_t p : {1, 2, 3, 4, 8}) {
    for (int64_t m : {1, 2, 4, 8, 16}) {
      for (int64_t r = 0; r < p; ++r) {
        EXPECT_EQ(in_flight_chunks(ScheduleKind::OneFOneB, p, 1, m, r),
                  peak_in_flight(build_schedule(ScheduleKind::OneFOneB, p, 1, m, r)))
            << "1f1b p " << p << " m " << m << " rank " << r;
        EXPECT_EQ(in_flight_chunks(ScheduleKind::GPipe, p, 1, m, r),
                  peak_in_flight(build_schedule(ScheduleKind::GPipe, p, 1, m, r)));
        if (p >= 2)
          EXPECT_EQ(in_flight_chunks(ScheduleKind::ZeroBubbleH1, p, 1, m, r),
                    peak_in_flight(build_schedule(ScheduleKind::ZeroBubbleH1, p, 1, m, r)))
              << "zb-h1 p " << p << " m " << m << " rank " << r;
        // zbv: the lists' own peak (no closed form), within its cap.
        if (p >= 2) {
          const int64_t zbv = in_flight_chunks(ScheduleKind::ZeroBubbleV, p, 2, m, r);
          EXPECT_EQ(zbv, peak_in_flight(build_schedule(ScheduleKind::ZeroBubbleV, p, 2, m, r)))
              << "zbv p " << p << " m " << m << " rank " << r;
          EXPECT_LE(zbv, 2 * std::min(m, p)) << "zbv p " << p << " m " << m << " rank " << r;
        }
        for (int64_t v : {2, 3}) {
          if (p < 2 || m % p != 0) continue;
          EXPECT_EQ(in_flight_chunks(ScheduleKind::Interleaved, p, v, m, r),
                    peak_in_flight(build_schedule(ScheduleKind::Interleaved, p, v, m, r)))
              << "interleaved p " << p << " v " << v << " m " << m << " rank " << r;
        }
      }
    }
  }
}

// ZB-H1 with F 1, B 2 (W half of it): the closed form's third of the
// bubble is the simulated schedule's, for m >= p.
TEST(PlanFormulas, ZeroBubbleClosedFormEqualsSimulation) {
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {8, 16}) {
      PipelineCosts pc;
      pc.kind = ScheduleKind::ZeroBubbleH1;
      pc.p = p, pc.v = 1, pc.m = m;
      pc.forward.assign(size_t(p), 1.0);
      pc.backward.assign(size_t(p), 2.0);
      pc.weight_share = 0.5;
      const PipelineTime est = pipeline_time_estimate(pc), sim = pipeline_time_simulated(pc);
      EXPECT_NEAR(est.seconds, sim.seconds, 1e-9) << "p " << p << " m " << m;
      EXPECT_NEAR(sim.seconds, 3.0 * double(m) + double(p - 1), 1e-9);
      EXPECT_NEAR(sim.bubble_fraction, double(p - 1) / (3.0 * double(m)), 1e-9);
    }
}

TEST(PlanFormulas, ClosedFormPipelineTimeEqualsSimulationForUniformCosts) {
  struct Case { ScheduleKind kind; int64_t p, v, m; };
  const Case cases[] = {{ScheduleKind::OneFOneB, 4, 1, 8}, {ScheduleKind::GPipe, 4, 1, 8},
                        {ScheduleKind::Interleaved, 4, 2, 8}, {ScheduleKind::OneFOneB, 8, 1, 64},
                        {ScheduleKind::Interleaved, 8, 4, 32}};
  for (const auto& c : cases) {
    PipelineCosts pc;
    pc.kind = c.kind;
    pc.p = c.p, pc.v = c.v, pc.m = c.m;
    pc.forward.assign(size_t(c.p * c.v), 1.0 / double(c.v));
    pc.backward.assign(size_t(c.p * c.v), 2.0 / double(c.v));
    PipelineTime est = pipeline_time_estimate(pc), sim = pipeline_time_simulated(pc);
    EXPECT_NEAR(est.seconds, sim.seconds, 1e-9) << schedule_kind_name(c.kind) << " p " << c.p;
    EXPECT_NEAR(sim.bubble_fraction, double(c.p - 1) / double(c.v * c.m), 1e-9);
  }
}
