// The loss scaler against hand-written traces of Megatron-LM's
// DynamicGradScaler (growth, hysteresis, backoff, the min clamp), the static
// scale, Megatron's defaults, validation, and a checkpoint round trip.
#include <gtest/gtest.h>

#include <vector>

#include "tessera/core/error.h"
#include "tessera/optim/loss_scaler.h"

using namespace tessera;

namespace {

struct Expect {
  bool overflow;       // fed to update()
  bool skip;           // update()'s answer
  float scale;         // after the update
  int64_t growth;      // growth tracker after
  int64_t hysteresis;  // hysteresis tracker after
};

void expect_trace(LossScaler& s, const std::vector<Expect>& trace) {
  for (size_t i = 0; i < trace.size(); i++) {
    const Expect& e = trace[i];
    EXPECT_EQ(s.update(e.overflow), e.skip) << "step " << i + 1;
    EXPECT_EQ(s.scale(), e.scale) << "step " << i + 1;
    EXPECT_EQ(s.growth_tracker(), e.growth) << "step " << i + 1;
    EXPECT_EQ(s.hysteresis_tracker(), e.hysteresis) << "step " << i + 1;
  }
}

LossScalerConfig small_config() {
  LossScalerConfig c;
  c.initial_scale = 16, c.min_scale = 1, c.window = 3, c.hysteresis = 2;
  return c;
}

}  // namespace

TEST(LossScaler, DynamicTraceMatchesMegatron) {
  LossScaler s(small_config());
  ASSERT_EQ(s.scale(), 16.0f);
  ASSERT_EQ(s.hysteresis_tracker(), 2);
  constexpr bool O = true, C = false;  // overflow, clean
  expect_trace(s, {
      {C, false, 16, 1, 2},
      {C, false, 16, 2, 2},
      {C, false, 32, 0, 2},   // 3 clean steps: grow
      {O, true, 32, 0, 1},    // first overflow: hysteresis absorbs it
      {C, false, 32, 1, 1},   // a clean step does not refill hysteresis
      {O, true, 16, 0, 0},    // second overflow: back off
      {O, true, 8, 0, -1},    // past hysteresis: every overflow backs off
      {C, false, 8, 1, -1},
      {C, false, 8, 2, -1},
      {C, false, 16, 0, 2},   // growth refills hysteresis
      {O, true, 16, 0, 1},
      {O, true, 8, 0, 0},
      {O, true, 4, 0, -1},
      {O, true, 2, 0, -2},
      {O, true, 1, 0, -3},
      {O, true, 1, 0, -4},    // clamped at --min-loss-scale
      {C, false, 1, 1, -4},
  });
  EXPECT_EQ(s.skipped_steps(), 9);
}

TEST(LossScaler, MegatronDefaults) {
  LossScaler s{LossScalerConfig{}};
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 4294967296.0f);  // 2^32
  EXPECT_EQ(s.inv_scale(), 0x1p-32f);
  for (int i = 0; i < 999; i++) ASSERT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 4294967296.0f);
  s.update(false);  // the 1000th clean step
  EXPECT_EQ(s.scale(), 8589934592.0f);
  s.update(true);  // hysteresis 2: the first overflow keeps the scale
  EXPECT_EQ(s.scale(), 8589934592.0f);
  s.update(true);
  EXPECT_EQ(s.scale(), 4294967296.0f);
}

TEST(LossScaler, StaticScaleNeverMovesButSkipsOverflows) {
  LossScalerConfig c;
  c.dynamic = false, c.static_scale = 1024;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  for (int i = 0; i < 5; i++) {
    EXPECT_TRUE(s.update(true));
    EXPECT_FALSE(s.update(false));
  }
  for (int i = 0; i < 3000; i++) s.update(false);
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.skipped_steps(), 5);
}

TEST(LossScaler, RejectsBadConfigs) {
  auto bad = [](auto edit) {
    LossScalerConfig c = small_config();
    edit(c);
    EXPECT_THROW(LossScaler{c}, Error);
  };
  bad([](LossScalerConfig& c) { c.min_scale = 32; });  // above the initial scale
  bad([](LossScalerConfig& c) { c.min_scale = 0; });
  bad([](LossScalerConfig& c) { c.initial_scale = -1; });
  bad([](LossScalerConfig& c) { c.window = 0; });
  bad([](LossScalerConfig& c) { c.hysteresis = 0; });
  bad([](LossScalerConfig& c) { c.dynamic = false, c.static_scale = 0; });
}

// A run checkpointed mid-way (trackers not at their rest values) and resumed
// from the JSON text makes the same decisions as the uninterrupted run.
TEST(LossScaler, StateRoundTripResumesIdentically) {
  LossScaler a(small_config());
  for (bool o : {false, false, false, true, false}) a.update(o);  // scale 32, g1, h1
  const std::string saved = a.state().dump();
  LossScaler b(small_config());
  b.load_state(nlohmann::json::parse(saved));
  EXPECT_EQ(b.scale(), 32.0f);
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.hysteresis_tracker(), 1);
  EXPECT_EQ(b.skipped_steps(), 1);
  for (bool o : {false, true, true, false, false, false, true, false}) {
    EXPECT_EQ(a.update(o), b.update(o));
    EXPECT_EQ(a.scale(), b.scale());
    EXPECT_EQ(a.state(), b.state());
  }
  nlohmann::json broken = a.state();
  broken.erase("growth_tracker");
  EXPECT_THROW(b.load_state(broken), Error);
  broken = a.state();
  broken["scale"] = 0;
  EXPECT_THROW(b.load_state(broken), Error);
}
