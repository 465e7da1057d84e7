// The flash kernel's backward at its own rate ([gemm]
// attention_backward_efficiency, SystemSpec::attention_backward_rate): a
// file with the key prices the backward entry at it and the forward and its
// recomputation at attention_efficiency; a file without it (every CPU
// calibration, the 2021 / A100 / Frontier / MI300X files) prices both at the
// forward's rate, as before; a value outside (0, 1] is refused naming the key.
#include <gtest/gtest.h>

#include <string>

#include "tessera/model/op_list.h"
#include "tessera/plan/layer_ops.h"
#include "tessera/plan/layout.h"
#include "tessera/plan/system.h"
#include "attention_entry.h"
#include "expect_error.h"
#include "shipped_system_path.h"
#include "temp_file.h"
#include "tiny_system_toml.h"

using namespace tessera;
using namespace tessera::plan;


TEST(AttentionBackward, BackwardEntryIsPricedAtItsOwnRate) {
  const SystemSpec same = load_system_text(kTinySystemToml + "[gemm]\nattention_efficiency = 0.5\n", "same");
  const SystemSpec split = load_system_text(
      kTinySystemToml + "[gemm]\nattention_efficiency = 0.5\nattention_backward_efficiency = 0.4\n", "split");
  EXPECT_DOUBLE_EQ(same.attention_backward_efficiency, 0.0);
  EXPECT_DOUBLE_EQ(same.attention_backward_rate(), 0.5);  // absent: the forward's
  EXPECT_DOUBLE_EQ(split.attention_backward_rate(), 0.4);
  PlanLayout L;
  L.precision = Precision::Fp32;
  const OpEntry fwd = attention_entry(OpPhase::Forward);
  const OpEntry rec = attention_entry(OpPhase::Recompute);
  const OpEntry bwd = attention_entry(OpPhase::Backward);
  // Time is FLOPs over rate: the backward 0.5 / 0.4 slower, the forward and
  // its recomputation unchanged.
  EXPECT_NEAR(op_seconds(bwd, split, L) / op_seconds(bwd, same, L), 0.5 / 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(op_seconds(fwd, split, L), op_seconds(fwd, same, L));
  EXPECT_DOUBLE_EQ(op_seconds(rec, split, L), op_seconds(rec, same, L));
  // The unfused path takes the same rates.
  PlanLayout unfused = L;
  unfused.flash_attention = false;
  EXPECT_NEAR(op_seconds(bwd, split, unfused) / op_seconds(bwd, same, unfused), 0.5 / 0.4, 1e-12);
}

TEST(AttentionBackward, SystemFileRefusesARateOutsideItsRange) {
  for (const char* v : {"0", "-0.3", "1.5", "nan", "inf"}) {
    const std::string path = write_temp("tessera_attn_bwd_bad.toml",
                                        kTinySystemToml + "[gemm]\nattention_backward_efficiency = " + v + "\n");
    EXPECT_TRUE(
        test::throws_error_with([&] { load_system_file(path); }, {path, "gemm.attention_backward_efficiency"}))
        << v;
  }
}

TEST(AttentionBackward, HopperFilesNameTheMeasuredBackwardOthersFallBack) {
  // FlashAttention-2's backward on H100 (Shah et al. 2024, Fig. 6): 310
  // TFLOPs/s at head dim 128, seq 4k, of 989, over max_efficiency 0.83.
  for (const char* name : {"h100", "h100-gt96", "h200"}) {
    const SystemSpec s = load_system_file(shipped_system_path(name));
    EXPECT_NEAR(s.attention_backward_efficiency, 310.0 / 989.0 / s.gemm_max_efficiency, 0.005) << name;
    EXPECT_LT(s.attention_backward_efficiency, s.attention_efficiency) << name;
  }
  // cuDNN's (Transformer Engine's) backward, same figure: 499 TFLOPs/s.
  const SystemSpec te = load_system_file(shipped_system_path("h100-2025"));
  EXPECT_NEAR(te.attention_backward_efficiency, 499.0 / 989.0 / te.gemm_max_efficiency, 0.005);
  // No published backward figure for these: one rate for both, as before.
  for (const char* name : {"local", "dgx-a100-80gb", "dgx-a100-40gb", "dgx-a100-80gb-2021", "jean-zay-a100",
                           "frontier", "mi300x"}) {
    const SystemSpec s = load_system_file(shipped_system_path(name));
    EXPECT_DOUBLE_EQ(s.attention_backward_efficiency, 0.0) << name;
    EXPECT_DOUBLE_EQ(s.attention_backward_rate(), s.attention_efficiency) << name;
  }
}
