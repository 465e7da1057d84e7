#include "tessera/plan/plots.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tessera/plan/report.h"
#include "tessera/plan/svg.h"

namespace tessera::plan {

namespace {

std::string si(double v) {  // 1234567 -> "1.23M"
  const char* unit[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::abs(v) >= 1000 && i < 4) v /= 1000, ++i;
  return fmt::format(fmt::runtime(v >= 100 ? "{:.0f}{}" : v >= 10 ? "{:.1f}{}" : "{:.2f}{}"), v,
                     unit[i]);
}

}  // namespace

HeatMap heatmap_tp_pp(const GPTConfig& model, const SystemSpec& sys, const SearchSpace& space,
                      const std::string& title) {
  HeatMap h;
  h.title = title;
  std::set<int64_t> tps, pps;
  for (const auto& L : enumerate_layouts(model, sys, space)) tps.insert(L.par.tp), pps.insert(L.par.pp);
  h.tp.assign(tps.begin(), tps.end());
  h.pp.assign(pps.begin(), pps.end());
  for (int64_t pp : h.pp) {
    std::vector<HeatMap::Cell> row;
    for (int64_t tp : h.tp) {
      SearchSpace s = space;
      s.tp = {tp};
      s.pp = {pp};
      s.refine = 4;  // one cell needs only its best
      SearchResult r = search_layouts(model, sys, s);
      HeatMap::Cell c;
      if (r.candidates == 0) {
        c.why_none = "no layout";
      } else if (r.ranked.empty()) {
        // The closest layout's time and how far over memory it is.
        const LayoutCost& miss = r.closest_misses.front();
        c.why_none = "does not fit";
        c.over = over_memory_text(miss);
        c.layout = fmt::format("{}: {}, {:.0f} tokens/s if it fit", miss.layout.str(),
                               over_memory_text(miss), miss.tokens_per_second);
      } else {
        c.tokens_per_second = r.ranked.front().tokens_per_second;
        c.mfu = r.ranked.front().mfu;
        c.layout = r.ranked.front().layout.str();
      }
      row.push_back(c);
    }
    h.cells.push_back(std::move(row));
  }
  return h;
}

std::string svg_heatmap(const HeatMap& h) {
  const double cw = 92, ch = 46, left = 90, top = 70, right = 150, bottom = 70;
  const std::string subtitle =
      "best predicted throughput (tokens/s) and MFU over every other setting; grey: why none";
  // Wide enough for the titles (a chart of one or two columns is narrower).
  const double W = std::max({left + cw * double(h.tp.size()) + right,
                             text_width(h.title, 15) + 24, text_width(subtitle, 11) + 24});
  const double H = top + ch * double(h.pp.size()) + bottom;
  Svg svg(W, H);
  svg.text(W / 2, 28, h.title, 15, "middle", true);
  svg.text(W / 2, 48, subtitle, 11, "middle", false, 0, "#555");
  double lo = 1e300, hi = 0;
  const HeatMap::Cell* best = nullptr;
  for (const auto& row : h.cells)
    for (const auto& c : row)
      if (c.tokens_per_second) {
        lo = std::min(lo, *c.tokens_per_second), hi = std::max(hi, *c.tokens_per_second);
        if (!best || *c.tokens_per_second > *best->tokens_per_second) best = &c;
      }
  if (!(hi > lo)) lo = hi * 0.5;
  for (size_t r = 0; r < h.pp.size(); ++r)
    for (size_t c = 0; c < h.tp.size(); ++c) {
      const auto& cell = h.cells[r][c];
      const double x = left + cw * double(c), y = top + ch * double(r);
      if (cell.tokens_per_second) {
        const double t = (*cell.tokens_per_second - lo) / (hi - lo);
        svg.rect(x + 1, y + 1, cw - 2, ch - 2, ramp_color(t), "cell", cell.layout);
        svg.text(x + cw / 2, y + ch / 2 - 2, si(*cell.tokens_per_second), 13, "middle", true, 0,
                 ramp_text_color(t));
        svg.text(x + cw / 2, y + ch / 2 + 13, fmt::format("MFU {:.1f}%", 100 * cell.mfu), 10,
                 "middle", false, 0, ramp_text_color(t));
        if (&cell == best) {
          svg.rect(x + 1, y + 1, cw - 2, 3, "#d62728");  // a red bar marks the best cell
          svg.rect(x + 1, y + ch - 4, cw - 2, 3, "#d62728");
        }
      } else {
        // Grey, saying why: no valid layout, or none fits (and by how much).
        svg.rect(x + 1, y + 1, cw - 2, ch - 2, "#e6e6e6", "cell",
                 cell.layout.empty() ? cell.why_none : cell.why_none + ": " + cell.layout);
        if (cell.over.empty()) {
          svg.text(x + cw / 2, y + ch / 2 + 4, cell.why_none, 10, "middle", false, 0, "#777");
        } else {
          svg.text(x + cw / 2, y + ch / 2 - 2, cell.why_none, 10, "middle", false, 0, "#777");
          svg.text(x + cw / 2, y + ch / 2 + 12, cell.over, 9, "middle", false, 0, "#777");
        }
      }
    }
  for (size_t c = 0; c < h.tp.size(); ++c)
    svg.text(left + cw * (double(c) + 0.5), top + ch * double(h.pp.size()) + 18,
             std::to_string(h.tp[c]), 12, "middle");
  for (size_t r = 0; r < h.pp.size(); ++r)
    svg.text(left - 10, top + ch * (double(r) + 0.5) + 4, std::to_string(h.pp[r]), 12, "end");
  svg.text(left + cw * double(h.tp.size()) / 2, top + ch * double(h.pp.size()) + 42,
           "tensor-parallel size (tp)", 13, "middle", true);
  svg.text(28, top + ch * double(h.pp.size()) / 2, "pipeline-parallel size (pp)", 13, "middle",
           true, -90);
  // Colour bar.
  const double bx = left + cw * double(h.tp.size()) + 30, bh = std::max(120.0, ch * double(h.pp.size()));
  for (int i = 0; i < 50; ++i)
    svg.rect(bx, top + bh * (1 - (i + 1) / 50.0), 16, bh / 50 + 0.5, ramp_color(i / 49.0));
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4.0, y = top + bh * (1 - i / 4.0);
    svg.line(bx + 16, y, bx + 20, y, "#222");
    svg.text(bx + 24, y + 4, si(v), 10);
  }
  svg.text(bx, top - 10, "tokens/s", 11, "start", true);
  if (best) svg.text(left, H - 8, "red bars: fastest — " + best->layout, 10, "start", false, 0, "#d62728");
  return svg.str();
}

std::string svg_scaling(const std::vector<ScalingCurve>& curves, const std::string& title) {
  const double pw = 400, ph = 260, left = 70, top = 95, gap = 90, bottom = 95;
  const double W = std::max(left + 2 * pw + gap + 30, text_width(title, 15) + 24);
  const double H = top + ph + bottom;
  Svg svg(W, H);
  svg.text(W / 2, 28, title, 15, "middle", true);
  svg.text(W / 2, 48, "lines: planner; hollow markers: the study's figure at the largest scale", 11,
           "middle", false, 0, "#555");
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"};
  for (int panel = 0; panel < 2; ++panel) {
    const bool weak = panel == 0;
    const double x0 = left + panel * (pw + gap), y0 = top;
    std::vector<const ScalingCurve*> mine;
    double dmin = 1e300, dmax = 0, emin = 1.0;
    for (const auto& c : curves)
      if (c.weak == weak) {
        mine.push_back(&c);
        dmin = std::min(dmin, double(c.devices.front()));
        dmax = std::max(dmax, double(c.devices.back()));
        for (double e : c.efficiency) emin = std::min(emin, e);
        emin = std::min(emin, c.study_efficiency / 100);
      }
    if (mine.empty()) continue;
    const double ylo = std::max(0.0, std::floor((emin - 0.05) * 10) / 10), yhi = 1.05;
    const double lx0 = std::log2(dmin) - 0.3, lx1 = std::log2(dmax) + 0.3;
    auto X = [&](double d) { return x0 + (std::log2(d) - lx0) / (lx1 - lx0) * pw; };
    auto Y = [&](double e) { return y0 + (1 - (e - ylo) / (yhi - ylo)) * ph; };
    svg.rect(x0, y0, pw, ph, "#fafafa");
    for (double e : nice_ticks(ylo, yhi, 5)) {
      svg.line(x0, Y(e), x0 + pw, Y(e), "#ddd");
      svg.text(x0 - 6, Y(e) + 4, fmt::format("{:.0f}%", 100 * e), 10, "end");
    }
    std::set<int64_t> ticks;
    for (auto* c : mine) ticks.insert(c->devices.begin(), c->devices.end());
    for (int64_t d : ticks) {
      svg.line(X(double(d)), y0 + ph, X(double(d)), y0 + ph + 4, "#222");
      svg.text(X(double(d)), y0 + ph + 17, std::to_string(d), 10, "middle");
    }
    svg.line(x0, y0 + ph, x0 + pw, y0 + ph, "#222");
    svg.line(x0, y0, x0, y0 + ph, "#222");
    svg.text(x0 + pw / 2, y0 - 10, weak ? "Weak scaling (batch per replica fixed)"
                                        : "Strong scaling (global batch fixed)",
             13, "middle", true);
    svg.text(x0 + pw / 2, y0 + ph + 38, "devices (GCDs, log scale)", 12, "middle");
    svg.text(x0 - 48, y0 + ph / 2, "scaling efficiency", 12, "middle", false, -90);
    for (size_t i = 0; i < mine.size(); ++i) {
      const auto& c = *mine[i];
      const std::string col = colors[(i + (weak ? 0 : 2)) % 4];
      std::vector<std::pair<double, double>> pts;
      for (size_t k = 0; k < c.devices.size(); ++k) pts.push_back({X(double(c.devices[k])), Y(c.efficiency[k])});
      svg.polyline(pts, col, 2.5, "", "curve");
      for (auto [x, y] : pts) svg.circle(x, y, 3.5, col);
      const double sx = X(double(c.devices.back())), sy = Y(c.study_efficiency / 100);
      svg.circle(sx, sy, 7, col);
      svg.circle(sx, sy, 5, "#fafafa");
      // Legend below the panel.
      const double ly = y0 + ph + 56 + 16 * double(i);
      svg.line(x0 + 10, ly - 4, x0 + 34, ly - 4, col, 2.5);
      svg.text(x0 + 40, ly, fmt::format("{} tp {} pp {}, {} {}: planner {:.1f}%, study {:.0f}%",
                                        c.model, c.tp, c.pp, weak ? "batch/replica" : "batch",
                                        c.batch, 100 * c.efficiency.back(), c.study_efficiency),
               10);
    }
  }
  return svg.str();
}

std::string svg_memory_stages(const LayoutCost& c, const SystemSpec& sys, const std::string& title) {
  const size_t n = c.stages.size();
  const double left = 70, top = 70, right = 170, bottom = 60;
  const double pw = std::clamp(36.0 * double(n), 240.0, 900.0), ph = 280;
  const double H = top + ph + bottom;
  const double W = std::max(left + pw + right, text_width(title, 15) + 24);
  Svg svg(W, H);
  svg.text(W / 2, 28, title, 15, "middle", true);
  svg.text(W / 2, 48, c.fits ? c.layout.str() : c.layout.str() + " (" + over_memory_text(c) + ")",
           11, "middle", false, 0, "#555");
  struct Part {
    const char* name;
    const char* color;
    double (*get)(const StageCost&);
  };
  const Part parts[] = {
      {"weights", "#4c72b0", [](const StageCost& s) { return s.state.params; }},
      {"gradients", "#55a868", [](const StageCost& s) { return s.state.grads; }},
      {"optimizer", "#c44e52", [](const StageCost& s) { return s.state.optimizer; }},
      {"activations", "#dd8452", [](const StageCost& s) { return s.activations; }},
      {"ZeRO-3 buffers", "#8172b2", [](const StageCost& s) { return s.zero3_buffers; }}};
  double top_gb = sys.usable_memory() / 1e9;
  for (const auto& s : c.stages) top_gb = std::max(top_gb, s.memory() / 1e9);
  const auto ticks = nice_ticks(0, top_gb * 1.05, 5);
  const double ymax = std::max(ticks.back(), top_gb * 1.05);
  auto Y = [&](double gb) { return top + (1 - gb / ymax) * ph; };
  for (double t : ticks) {
    svg.line(left, Y(t), left + pw, Y(t), "#e3e3e3");
    svg.text(left - 6, Y(t) + 4, fmt::format("{:g}", t + 0.0), 10, "end");  // no "-0"
  }
  const double slot = pw / double(n), bw = std::max(1.0, slot * 0.72);
  const size_t label_every = std::max<size_t>(1, n / 16);
  for (size_t i = 0; i < n; ++i) {
    const auto& s = c.stages[i];
    const double x = left + slot * double(i) + (slot - bw) / 2;
    double acc = 0;
    for (const auto& p : parts) {
      const double gb = p.get(s) / 1e9;
      if (gb <= 0) continue;
      svg.rect(x, Y(acc + gb), bw, Y(acc) - Y(acc + gb), p.color, "bar",
               fmt::format("stage {} {}: {:.2f} GB", s.stage, p.name, gb));
      acc += gb;
    }
    if (i % label_every == 0 || i + 1 == n)
      svg.text(x + bw / 2, top + ph + 16, std::to_string(s.stage), 10, "middle");
  }
  svg.line(left, top + ph, left + pw, top + ph, "#222");
  svg.line(left, top, left, top + ph, "#222");
  const double usable = sys.usable_memory() / 1e9;
  svg.line(left, Y(usable), left + pw, Y(usable), "#222", 1.5, "6,4");
  svg.text(left + pw - 4, Y(usable) - 5, fmt::format("usable {:.1f} GB", usable), 10, "end");
  svg.text(left + pw / 2, top + ph + 40, "pipeline stage", 12, "middle", true);
  svg.text(left - 46, top + ph / 2, "memory per device (GB)", 12, "middle", true, -90);
  double ly = top + 10;
  for (const auto& p : parts) {
    if (std::string(p.name) == "ZeRO-3 buffers" && c.stages.front().zero3_buffers <= 0) continue;
    svg.rect(left + pw + 20, ly - 10, 12, 12, p.color);
    svg.text(left + pw + 38, ly, p.name, 11);
    ly += 20;
  }
  return svg.str();
}

}  // namespace tessera::plan
