#include "tessera/train/step_stats.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace tessera {

std::string format_step_line(const StepStats& s) {
  std::string line = fmt::format(
      "step {:>{}}/{} | loss {:.4f} | lr {:.3e} | grad norm {:.3f} | {:.1f} ms | {:.0f} tok/s | "
      "{:.3f} TFLOP/s",
      s.step, fmt::formatted_size("{}", s.total_steps), s.total_steps, s.loss, s.lr, s.grad_norm,
      s.seconds * 1e3, s.tokens_per_second(), s.tflops());
  if (s.peak_tflops > 0) line += fmt::format(" | MFU {:.1f}%", 100.0 * s.mfu());
  if (s.peak_tflops > 0 && s.hardware_flops > s.model_flops)  // recomputation: hardware FLOPs too
    line += fmt::format(" (HFU {:.1f}%)",
                        100.0 * s.hardware_flops / s.seconds / 1e12 / double(s.ranks) / s.peak_tflops);
  if (s.gemm_peak_tflops > 0)
    // fp32's wording is the one older logs and readers know; a 16-bit run
    // names its precision (its ceiling is `bench peak --bf16`'s / --fp16's).
    line += s.precision == "fp32"
                ? fmt::format(" | {:.1f}% of measured GEMM peak", 100.0 * s.of_gemm_peak())
                : fmt::format(" | {:.1f}% of measured {} GEMM peak", 100.0 * s.of_gemm_peak(),
                              s.precision);
  if (s.idle_fraction >= 0) line += fmt::format(" | pipeline idle {:.1f}%", 100.0 * s.idle_fraction);
  if (s.comm_total_bytes() > 0) line += fmt::format(" | comm {:.2f} MB", s.comm_total_bytes() / 1e6);
  if (s.valid_loss >= 0) line += fmt::format(" | valid loss {:.4f}", s.valid_loss);
  if (s.precision != "fp32") line += fmt::format(" | {}", s.precision);  // fp32: as before
  if (s.loss_scale > 0)
    line += fmt::format(" | loss scale {:g} | skipped {}{}", s.loss_scale, s.skipped_steps,
                        s.skipped ? " (this step)" : "");
  if (s.moe) {
    double worst = 0;
    for (const auto& [layer, v] : s.moe_imbalance) worst = std::max(worst, v);
    line += fmt::format(" | moe aux {:.4f} z {:.4f} imbalance {:.2f} dropped {}", s.moe_aux_loss,
                        s.moe_z_loss, worst, s.moe_dropped);
  }
  return line;
}

nlohmann::json step_to_json(const StepStats& s) {
  nlohmann::json breakdown;
  for (size_t i = 0; i < size_t(Op::kCount); ++i)
    if (s.profile.seconds[i] > 0) breakdown[std::string(op_name(Op(i)))] = s.profile.seconds[i];
  nlohmann::json j = {{"step", s.step},
                      {"loss", s.loss},
                      {"lr", s.lr},
                      {"grad_norm", s.grad_norm},
                      {"step_seconds", s.seconds},
                      {"tokens", s.tokens},
                      {"tokens_per_second", s.tokens_per_second()},
                      {"model_flops", s.model_flops},
                      {"hardware_flops", s.hardware_flops},
                      {"tflops_per_rank", s.tflops()},
                      {"ranks", s.ranks},
                      {"precision", s.precision},
                      {"seconds_by_op", breakdown},
                      {"comm_bytes", s.comm_bytes},
                      {"comm_seconds", s.comm_seconds}};
  if (!s.comm_seconds_by_op.empty()) j["comm_seconds_by_op"] = s.comm_seconds_by_op;
  if (s.wall_time > 0) j["wall_time"] = s.wall_time;
  if (s.peak_tflops > 0) {
    j["peak_tflops"] = s.peak_tflops;
    j["mfu"] = s.mfu();
  }
  if (s.gemm_peak_tflops > 0) {
    j["gemm_peak_tflops"] = s.gemm_peak_tflops;
    j["of_gemm_peak"] = s.of_gemm_peak();
  }
  if (s.valid_loss >= 0) j["valid_loss"] = s.valid_loss;
  if (s.loss_scale > 0) {
    j["loss_scale"] = s.loss_scale;
    j["skipped_steps"] = s.skipped_steps;
    j["skipped"] = s.skipped;
  }
  if (s.idle_fraction >= 0) j["idle_fraction"] = s.idle_fraction;
  if (s.moe) {
    j["moe_aux_loss"] = s.moe_aux_loss;
    j["moe_z_loss"] = s.moe_z_loss;
    j["moe_tokens_dropped"] = s.moe_dropped;
    nlohmann::json imb = nlohmann::json::object();  // {"layer": max / mean tokens per expert}
    for (const auto& [layer, v] : s.moe_imbalance) imb[std::to_string(layer)] = v;
    j["moe_imbalance"] = imb;
  }
  return j;
}

}  // namespace tessera
