// `tessera tune`'s choice of the next trial (tune/tune_model.h): expected
// improvement under the corrected model, with a spread of the model's own
// error times how new a layout is to the trials. Greedy on the prediction
// alone would try a near-copy of a measured layout; the rule must prefer an
// untried family that could be faster.
#include <gtest/gtest.h>

#include "tessera/tune/tune_model.h"

using namespace tessera;
using namespace tessera::tune;

namespace {

plan::PlanLayout layout(int64_t tp, int64_t pp, int zero, int64_t mb = 2) {
  plan::PlanLayout L;
  L.par.tp = tp;
  L.par.pp = pp;
  L.par.dp = 4 / (tp * pp);
  L.par.micro_batch = mb;
  L.par.global_batch = 16;
  L.par.zero_stage = zero;
  return L;
}

plan::LayoutCost cost(const plan::PlanLayout& L, double step) {
  plan::LayoutCost c;
  c.layout = L;
  c.time.step = step;
  return c;
}

Trial trial(const plan::PlanLayout& L, double predicted_after, double measured) {
  Trial t;
  t.layout = L;
  t.status = "ok";
  t.predicted_before = predicted_after;
  t.predicted_after = predicted_after;
  t.measured = measured;
  return t;
}

}  // namespace

TEST(TuneChoice, NoveltyByWhatATrialShares) {
  const std::vector<Trial> trials{trial(layout(1, 1, 1), 0.1, 0.1)};
  EXPECT_DOUBLE_EQ(novelty(layout(1, 1, 2), trials), 0.25);        // another ZeRO stage
  EXPECT_DOUBLE_EQ(novelty(layout(1, 1, 1, 4), trials), 0.5);      // same tp x pp, other mb
  EXPECT_DOUBLE_EQ(novelty(layout(2, 1, 1), trials), 1.0);         // a new tp x pp
  EXPECT_DOUBLE_EQ(novelty(layout(2, 1, 1), {}), 1.0);
}

TEST(TuneChoice, ModelErrorFromTheCorrectedTrials) {
  EXPECT_DOUBLE_EQ(model_error({}), 0.30);
  // The first trial (uncorrected) is left out; then |1.2 - 1| and |0.9 - 1|.
  const std::vector<Trial> t{trial(layout(1, 1, 0), 0.5, 0.1), trial(layout(1, 1, 1), 0.12, 0.1),
                             trial(layout(1, 1, 2), 0.09, 0.1)};
  EXPECT_NEAR(model_error(t), 0.15, 1e-12);
  // Never under 5 %: a short trial is noisier than that.
  const std::vector<Trial> exact{trial(layout(1, 1, 0), 0.1, 0.1), trial(layout(1, 1, 1), 0.1, 0.1)};
  EXPECT_DOUBLE_EQ(model_error(exact), 0.05);
}

TEST(TuneChoice, PrefersAnUnsureFamilyOverANearCopy) {
  // Measured: tp 1 pp 1 zero 1 at 100 ms. The corrected model predicts its
  // ZeRO-2 twin at 95 ms and a new tp 2 layout at 105 ms. With a 30 %
  // error, the twin's spread is 7 ms (0.25 novelty), the new family's 31 ms:
  // the new family has more to gain (about 10 ms expected against 6).
  const std::vector<Trial> trials{trial(layout(1, 1, 1), 0.1, 0.1)};
  const std::vector<plan::LayoutCost> ranked{cost(layout(1, 1, 1), 0.094),
                                             cost(layout(1, 1, 2), 0.095),
                                             cost(layout(2, 1, 1), 0.105)};
  const std::set<std::string> tried{layout(1, 1, 1).str()};
  const plan::LayoutCost* next = most_promising(ranked, trials, tried);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->layout.str(), layout(2, 1, 1).str());
  // A new family predicted far slower (500 ms) cannot gain: the twin wins.
  const std::vector<plan::LayoutCost> far{cost(layout(1, 1, 2), 0.095), cost(layout(2, 1, 1), 0.5)};
  EXPECT_EQ(most_promising(far, trials, tried)->layout.str(), layout(1, 1, 2).str());
}

TEST(TuneChoice, FirstTrialIsTheFastestPredictionAndNoneWhenAllTried) {
  const std::vector<plan::LayoutCost> ranked{cost(layout(2, 1, 0), 0.08),
                                             cost(layout(1, 1, 0), 0.09)};
  EXPECT_EQ(most_promising(ranked, {}, {})->layout.str(), layout(2, 1, 0).str());
  EXPECT_EQ(most_promising(ranked, {}, {layout(2, 1, 0).str()})->layout.str(),
            layout(1, 1, 0).str());
  EXPECT_EQ(most_promising(ranked, {}, {layout(2, 1, 0).str(), layout(1, 1, 0).str()}), nullptr);
}
