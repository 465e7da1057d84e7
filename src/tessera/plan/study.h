// Reproduce Dash et al. 2024, "Optimizing Distributed Training on Frontier
// for Large Language Models" (arXiv:2312.12705): the study's published
// layouts, measured run and scaling figures beside the planner's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plan/system.h"

namespace tessera::plan {

// One scaling series of the study, as the planner predicts it.
struct ScalingCurve {
  std::string model;
  bool weak = true;            // weak: batch per replica fixed; strong: global batch fixed
  int64_t tp = 1, pp = 1, batch = 0;
  std::vector<int64_t> devices;
  std::vector<double> efficiency;  // throughput per device / the first point's
  double study_efficiency = 0;     // the study's figure at the largest point
};
// The study's weak (175B, 1T) and strong (175B, 1T) scaling series.
std::vector<ScalingCurve> study_scaling(const SystemSpec& sys);

// The whole comparison as text (`tessera plan --study --system frontier`).
std::string reproduce_study(const SystemSpec& sys);

}  // namespace tessera::plan
