#include "tessera/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "tessera/core/error.h"

namespace tessera {

namespace {

void validate(const LossScalerConfig& c) {
  if (!c.dynamic) {
    TESSERA_CHECK(c.static_scale > 0 && std::isfinite(c.static_scale),
                  "--loss-scale must be a positive number, got {}", c.static_scale);
    return;
  }
  TESSERA_CHECK(c.initial_scale > 0 && std::isfinite(c.initial_scale),
                "--initial-loss-scale must be a positive number, got {}", c.initial_scale);
  TESSERA_CHECK(c.min_scale > 0, "--min-loss-scale must be positive, got {}", c.min_scale);
  TESSERA_CHECK(c.min_scale <= c.initial_scale,
                "--min-loss-scale ({}) must not exceed --initial-loss-scale ({})", c.min_scale,
                c.initial_scale);
  TESSERA_CHECK(c.window >= 1, "--loss-scale-window must be at least 1, got {}", c.window);
  TESSERA_CHECK(c.hysteresis >= 1, "--hysteresis must be at least 1, got {}", c.hysteresis);
  TESSERA_CHECK(c.growth_factor > 1, "loss scale growth factor must exceed 1");
  TESSERA_CHECK(c.backoff_factor > 0 && c.backoff_factor < 1,
                "loss scale backoff factor must be in (0, 1)");
}

}  // namespace

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config),
      scale_(config.dynamic ? config.initial_scale : config.static_scale),
      hysteresis_tracker_(config.hysteresis) {
  validate(config_);
}

bool LossScaler::update(bool found_overflow) {
  if (found_overflow) skipped_steps_++;
  if (!config_.dynamic) return found_overflow;
  if (found_overflow) {
    growth_tracker_ = 0;
    hysteresis_tracker_--;
    // Tolerate `hysteresis` overflows (a spike) before backing off; after
    // that, every overflow backs off until a growth refills the tracker.
    if (hysteresis_tracker_ <= 0)
      scale_ = std::max(scale_ * config_.backoff_factor, config_.min_scale);
    return true;
  }
  growth_tracker_++;
  // >= rather than Megatron's ==: the same on any run, and a run resumed
  // with a smaller --loss-scale-window still grows.
  if (growth_tracker_ >= config_.window) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = config_.hysteresis;
    scale_ *= config_.growth_factor;
  }
  return false;
}

nlohmann::json LossScaler::state() const {
  // The scale is a power of two times a float: a JSON double holds it exactly.
  return {{"scale", double(scale_)},
          {"growth_tracker", growth_tracker_},
          {"hysteresis_tracker", hysteresis_tracker_},
          {"skipped_steps", skipped_steps_}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  for (const char* key : {"scale", "growth_tracker", "hysteresis_tracker", "skipped_steps"})
    TESSERA_CHECK(state.contains(key) && state[key].is_number(),
                  "loss scaler state: missing or non-numeric '{}'", key);
  const double scale = state["scale"].get<double>();
  TESSERA_CHECK(scale > 0 && std::isfinite(scale), "loss scaler state: bad scale {}", scale);
  const int64_t growth = state["growth_tracker"].get<int64_t>();
  TESSERA_CHECK(growth >= 0, "loss scaler state: negative growth_tracker {}", growth);
  skipped_steps_ = state["skipped_steps"].get<int64_t>();
  if (!config_.dynamic) return;  // a static scale comes from --loss-scale, not the checkpoint
  scale_ = float(scale);
  growth_tracker_ = growth;
  hysteresis_tracker_ = state["hysteresis_tracker"].get<int64_t>();
}

}  // namespace tessera
