// Whole-model finite-difference check: the analytic gradient of the mean
// loss with respect to a sample of every parameter tensor's elements equals
// the central difference of the loss, on a tiny model.
#include <gtest/gtest.h>

#include <cmath>

#include "tessera/core/rng.h"
#include "tessera/model/gpt.h"

namespace tessera {
namespace {

TEST(GptGradcheck, EveryParameterTensorMatchesFiniteDifferences) {
  GPTConfig m;
  m.num_layers = 2;
  m.hidden_size = 16;
  m.num_heads = 2;
  m.seq_length = 8;
  m.vocab_size = 23;
  m.init_std = 0.2f;  // larger weights: gradients well above fp32 noise
  ParamLayout layout = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  GPT model(m, layout);
  model.init(3);
  const int64_t B = 2, T = m.seq_length, N = B * T;
  std::vector<int32_t> in(N), tgt(N);
  for (int64_t i = 0; i < N; ++i) {
    in[i] = int32_t(rng_u64(5, 0, i) % 23);
    tgt[i] = int32_t(rng_u64(5, 1, i) % 23);
  }
  tgt[3] = -1;  // an ignored target must not contribute
  Activations acts;
  activations_init(acts, model.act_shape(B, T));
  const int64_t valid = N - 1;

  auto loss_at = [&]() { return double(model.forward(acts, in.data(), tgt.data())); };
  loss_at();
  model.backward(acts, in.data(), tgt.data(), 1.0f / float(valid));

  float* p = model.params().f32();
  const float* g = model.grads().f32();
  int checked = 0;
  for (const ParamEntry& e : layout.entries()) {
    const int64_t rows = e.name == "wte" ? m.vocab_size * m.hidden_size : e.numel();
    for (int k = 0; k < 4; ++k) {
      int64_t i = e.offset + int64_t(rng_u64(11, uint64_t(checked), k) % uint64_t(rows));
      const float h = 1e-2f;
      const float saved = p[i];
      p[i] = saved + h;
      double up = loss_at();
      p[i] = saved - h;
      double down = loss_at();
      p[i] = saved;
      double numeric = (up - down) / (2.0 * h);
      double tol = 2e-3 + 2e-2 * std::fabs(numeric);
      EXPECT_NEAR(g[i], numeric, tol) << e.name << " element " << (i - e.offset);
      ++checked;
    }
  }
  EXPECT_EQ(checked, int(layout.entries().size()) * 4);
  // Padding rows of the token table get no gradient.
  const ParamEntry& wte = layout.find("wte");
  for (int64_t i = m.vocab_size * m.hidden_size; i < wte.numel(); ++i)
    ASSERT_EQ(g[wte.offset + i], 0.0f);
}

}  // namespace
}  // namespace tessera
