// Causal attention on a tile-skipping flash kernel (plan/causal_attention.h):
// the share of 128-token tiles on and below the diagonal, scaled so a long
// sequence takes 1 / causal_speedup of the non-causal time; the unfused
// attention and a system without the key (every CPU calibration) price the
// whole matrix as before.
#include <gtest/gtest.h>

#include <string>

#include "tessera/model/op_list.h"
#include "tessera/plan/causal_attention.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"
#include "expect_error.h"
#include "shipped_system_path.h"
#include "temp_file.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;

TEST(CausalAttention, FractionFollowsTheTilesOnAndBelowTheDiagonal) {
  EXPECT_DOUBLE_EQ(causal_attention_fraction(2048, 0.0), 1.0);  // no key: the whole matrix
  // One tile (and less): all of it computed, never above the non-causal time.
  EXPECT_DOUBLE_EQ(causal_attention_fraction(128, 1.7), 1.0);
  EXPECT_DOUBLE_EQ(causal_attention_fraction(100, 1.7), 1.0);
  // 2048 tokens = 16 tiles: 136 of 256 computed, (17 / 32) x 2 / 1.7.
  EXPECT_NEAR(causal_attention_fraction(2048, 1.7), 17.0 / 32.0 * 2.0 / 1.7, 1e-12);
  // Long sequences reach the measured speedup.
  EXPECT_NEAR(causal_attention_fraction(1 << 20, 1.7), 1.0 / 1.7, 1e-3);
  // A partial last tile counts as a tile.
  EXPECT_DOUBLE_EQ(causal_attention_fraction(2049, 2.0), causal_attention_fraction(2176, 2.0));
  EXPECT_LT(causal_attention_fraction(8192, 1.7), causal_attention_fraction(2048, 1.7));
}

TEST(CausalAttention, FlashLayoutsOnASystemWithTheKeyPriceTheCausalShare) {
  const SystemSpec with = load_system_text(kTinySystemToml + "[gemm]\ncausal_speedup = 1.7\n", "with");
  const SystemSpec without = load_system_text(kTinySystemToml, "without");
  EXPECT_DOUBLE_EQ(without.attention_causal_speedup, 0.0);
  OpEntry e;
  e.cls = OpClass::Attention;
  e.op = Op::Attention;
  e.m = 2, e.n = 2048, e.k = 64, e.batch = 4;  // B, T, Cl, NH
  e.flops = 4.0 * 2 * 2048.0 * 2048.0 * 256;
  PlanLayout flash;
  flash.precision = Precision::Fp32;
  PlanLayout unfused = flash;
  unfused.flash_attention = false;
  const double full = op_seconds(e, without, flash);
  EXPECT_GT(full, 0);
  EXPECT_NEAR(op_seconds(e, with, flash) / full, causal_attention_fraction(2048, 1.7), 1e-12);
  // The unfused attention computes the whole masked matrix.
  EXPECT_DOUBLE_EQ(op_seconds(e, with, unfused), op_seconds(e, without, unfused));
  // Context parallelism: the mask spans all cp x T tokens, not the rank's T.
  PlanLayout cp2 = flash;
  cp2.par.cp = 2;
  EXPECT_NEAR(op_seconds(e, with, cp2) / full, causal_attention_fraction(4096, 1.7), 1e-12);
}

TEST(CausalAttention, SystemFileRefusesASpeedupOutsideItsRange) {
  for (const char* v : {"2.5", "0.5", "-1"}) {
    const std::string path = write_temp(
        "tessera_causal_bad.toml", kTinySystemToml + "[gemm]\ncausal_speedup = " + v + "\n");
    EXPECT_TRUE(test::throws_error_with([&] { load_system_file(path); }, {path, "gemm.causal_speedup"}))
        << v;
  }
  // Every GPU file with a FlashAttention-2-style kernel names the paper's low end;
  // this machine's file has none: its plans do not change.
  for (const char* name : {"h100", "h100-2025", "h100-gt96", "h200", "dgx-a100-80gb", "dgx-a100-40gb"})
    EXPECT_DOUBLE_EQ(load_system_file(shipped_system_path(name))
                         .attention_causal_speedup,
                     1.7)
        << name;
  for (const char* name : {"local", "dgx-a100-80gb-2021", "jean-zay-a100", "frontier", "mi300x"})
    EXPECT_DOUBLE_EQ(load_system_file(shipped_system_path(name))
                         .attention_causal_speedup,
                     0.0)
        << name;
}
