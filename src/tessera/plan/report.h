// Reports of planner results: a text table for people, JSON for scripts.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/plan/search.h"

namespace tessera::plan {

// One line per layout: layout, throughput, step time, MFU, memory, overheads
// (for a layout that does not fit: how far over memory it is). At most 100
// columns.
std::string format_table(const std::vector<LayoutCost>& costs, size_t top_k);
// The same columns for layouts that do not fit: their predicted time, and
// "+12.3 GB over" in place of the overheads.
std::string format_miss_table(const std::vector<LayoutCost>& costs, size_t top_k);
// "+12.3 GB over": how far the peak stage exceeds usable memory ("" if it fits).
std::string over_memory_text(const LayoutCost& c);
// A warning when a run of ranks x threads is predicted on a calibration
// taken with another ranks x threads ("" when they agree or are unknown);
// three lines, each within 100 columns after "warning: ".
std::string calibration_mismatch(const SystemSpec& sys, int64_t ranks, int64_t threads);
// A warning when a calibrated system (one `tessera calibrate` wrote: it
// names the ranks x threads it measured) describes another CPU than
// `this_cpu` (/proc/cpuinfo's model name): the shipped local.toml is one
// machine's, and a plan priced on it elsewhere is off by the two machines'
// ratio. "" when they agree, or for a datasheet system.
std::string foreign_calibration(const SystemSpec& sys, const std::string& this_cpu);
// A warning when a calibration of more ranks x threads than cores had every
// rank measure at once (SystemSpec::kernels_include_sharing: one from before
// 2026-12-02): its tables hold a share of the sharing that the planner adds
// again (layout_cost.cpp, core_sharing), and a fresh calibration holds
// none. "" otherwise; lines within 100 columns after "warning: ".
std::string shared_core_calibration(const SystemSpec& sys);
// What a system file itself warrants warning of before planning on it: the
// two above that apply (none for a datasheet system).
std::vector<std::string> calibration_file_warnings(const SystemSpec& sys,
                                                   const std::string& this_cpu);
// The breakdown of one layout: time parts, memory per stage, the limiter.
std::string format_breakdown(const LayoutCost& c, const SystemSpec& sys);
nlohmann::json layout_json(const LayoutCost& c);
nlohmann::json search_json(const SearchResult& r, size_t top_k);

}  // namespace tessera::plan
