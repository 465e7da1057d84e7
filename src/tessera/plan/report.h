// Reports of planner results: a text table for people, JSON for scripts.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/plan/search.h"

namespace tessera::plan {

// One line per layout: layout, throughput, step time, MFU, memory, overheads.
std::string format_table(const std::vector<LayoutCost>& costs, size_t top_k);
// The breakdown of one layout: time parts, memory per stage, the limiter.
std::string format_breakdown(const LayoutCost& c, const SystemSpec& sys);
nlohmann::json layout_json(const LayoutCost& c);
nlohmann::json search_json(const SearchResult& r, size_t top_k);

}  // namespace tessera::plan
