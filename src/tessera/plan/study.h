// Reproduce Dash et al. 2024, "Optimizing Distributed Training on Frontier
// for Large Language Models" (arXiv:2312.12705): the study's published
// layouts, measured run and scaling figures beside the planner's.
#pragma once
#include <string>

#include "tessera/plan/system.h"

namespace tessera::plan {

// The whole comparison as text (`tessera plan --study --system frontier`).
std::string reproduce_study(const SystemSpec& sys);

}  // namespace tessera::plan
