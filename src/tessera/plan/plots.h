// The planner's charts as SVG (`tessera plan ... --svg DIR`): throughput over
// tp x pp as a heat map, the study's weak and strong scaling curves, and the
// memory of each pipeline stage as stacked bars.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tessera/plan/search.h"
#include "tessera/plan/study.h"

namespace tessera::plan {

// The best predicted throughput of each (tp, pp) over everything else the
// space allows; empty cells say why there is none.
struct HeatMap {
  std::string title;
  std::vector<int64_t> tp, pp;  // columns, rows
  struct Cell {
    std::optional<double> tokens_per_second;
    double mfu = 0;
    std::string why_none;       // "no layout" or "does not fit"
    std::string over;           // does not fit: "+12.3 GB over" (its least-memory layout)
    std::string layout;         // the best layout of the cell (or the closest miss)
  };
  std::vector<std::vector<Cell>> cells;  // [pp index][tp index]
};
HeatMap heatmap_tp_pp(const GPTConfig& model, const SystemSpec& sys, const SearchSpace& space,
                      const std::string& title);

std::string svg_heatmap(const HeatMap& h);
// Weak and strong scaling side by side: planner curves, the study's figures as markers.
std::string svg_scaling(const std::vector<ScalingCurve>& curves, const std::string& title);
// One stacked bar per pipeline stage: weights, grads, optimizer, activations
// (and ZeRO-3 buffers), with the device's usable memory as a line.
std::string svg_memory_stages(const LayoutCost& c, const SystemSpec& sys, const std::string& title);

}  // namespace tessera::plan
