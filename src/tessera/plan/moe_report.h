// The report's paragraph on a mixture-of-experts plan: the experts' share of
// the parameters and of a token's work, and for each expert-parallel size
// the experts' memory per rank it saves against the all-to-all time it adds
// (moe_cost.h): why the plan's ep is what it is.
#pragma once
#include <string>

#include "tessera/config/gpt_config.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

// "" for a dense model.
std::string moe_ep_report(const GPTConfig& m, const SystemSpec& sys, const LayoutCost& best);

}  // namespace tessera::plan
