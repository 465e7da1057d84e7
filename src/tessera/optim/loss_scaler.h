// Loss scaling for fp16 training, with Megatron-LM's semantics and flags.
//
// The loss is multiplied by scale() before backward so small gradients stay
// above fp16's underflow; the fp32 gradients are multiplied by inv_scale()
// before the optimizer. If any gradient is inf/NaN (on any rank: the caller
// agrees the flag first), the step is skipped and a dynamic scaler backs off.
//
// Dynamic (Megatron's DynamicGradScaler):
//   overflow:  growth tracker = 0; hysteresis tracker -= 1; once it is <= 0,
//              every further overflow halves the scale (never below min).
//   clean:     growth tracker += 1; at `window` clean steps in a row, the
//              scale doubles, the growth tracker restarts at 0 and the
//              hysteresis tracker is refilled to `hysteresis`.
// A clean step alone does not refill the hysteresis tracker: only growth
// does. Static (--loss-scale): the scale never changes, an overflowing
// step is still skipped.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

namespace tessera {

struct LossScalerConfig {
  bool dynamic = true;              // false when --loss-scale is given
  float static_scale = 1.0f;        // --loss-scale
  float initial_scale = 4294967296.0f;  // --initial-loss-scale (2^32)
  float min_scale = 1.0f;           // --min-loss-scale
  int64_t window = 1000;            // --loss-scale-window: clean steps before growth
  int64_t hysteresis = 2;           // --hysteresis: overflows tolerated before backoff
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
};

class LossScaler {
 public:
  // Validates the config (positive scales, min <= initial, window and
  // hysteresis >= 1, growth > 1, backoff in (0, 1)); throws tessera::Error.
  explicit LossScaler(const LossScalerConfig& config);

  float scale() const { return scale_; }
  // 1/scale computed in double, then rounded (as Megatron): exact for powers of two.
  float inv_scale() const { return float(1.0 / double(scale_)); }

  // Feed one step's agreed overflow flag. Returns true when the step must be
  // skipped (exactly when found_overflow).
  bool update(bool found_overflow);

  bool dynamic() const { return config_.dynamic; }
  int64_t growth_tracker() const { return growth_tracker_; }
  int64_t hysteresis_tracker() const { return hysteresis_tracker_; }
  int64_t skipped_steps() const { return skipped_steps_; }  // overflows seen, for the log

  // {"scale", "growth_tracker", "hysteresis_tracker", "skipped_steps"}: all a
  // resumed run needs to make the same decisions as an uninterrupted one.
  nlohmann::json state() const;
  // Restores state(); throws tessera::Error on a missing or invalid field.
  // A static scaler keeps its --loss-scale and restores only skipped_steps.
  void load_state(const nlohmann::json& state);

 private:
  LossScalerConfig config_;
  float scale_;
  int64_t growth_tracker_ = 0;
  int64_t hysteresis_tracker_;
  int64_t skipped_steps_ = 0;
};

}  // namespace tessera
