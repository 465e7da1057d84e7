#include "tessera/plan/line_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tessera/plan/svg.h"

namespace tessera::plan {

namespace {

// Tick labels short enough for the axis: 12000 -> "12k", 2.5e6 -> "2.5M".
std::string tick_label(double v) {
  const double a = std::abs(v);
  if (a >= 1e9) return fmt::format("{:g}G", v / 1e9);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  return fmt::format("{:g}", v);
}

// [lo, hi] of one coordinate over every point, widened when flat.
std::pair<double, double> extent(const LineChart& c, bool x) {
  double lo = 1e300, hi = -1e300;
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      const double v = x ? p.first : p.second;
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
  if (lo > hi) return {0, 1};
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) lo -= 0.5, hi += 0.5;
  return {lo, hi};
}

}  // namespace

std::string svg_line_chart(const LineChart& c) {
  const char* palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};
  const double left = 80, top = 50, pw = 560, ph = 300, bottom = 70;
  const double W = left + pw + 40, H = top + ph + bottom + 16 * double(c.series.size());
  Svg svg(W, H);
  svg.text(W / 2, 28, c.title, 15, "middle", true);
  auto [xlo, xhi] = extent(c, true);
  auto [ylo, yhi] = extent(c, false);
  const std::vector<double> xt = nice_ticks(xlo, xhi, 6), yt = nice_ticks(ylo, yhi, 6);
  xlo = std::min(xlo, xt.front()), xhi = std::max(xhi, xt.back());
  ylo = std::min(ylo, yt.front()), yhi = std::max(yhi, yt.back());
  auto X = [&](double x) { return left + (x - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double y) { return top + (1 - (y - ylo) / (yhi - ylo)) * ph; };
  svg.rect(left, top, pw, ph, "#fafafa");
  for (double y : yt) {
    svg.line(left, Y(y), left + pw, Y(y), "#ddd");
    svg.text(left - 6, Y(y) + 4, tick_label(y), 10, "end");
  }
  for (double x : xt) {
    svg.line(X(x), top + ph, X(x), top + ph + 4, "#222");
    svg.text(X(x), top + ph + 17, tick_label(x), 10, "middle");
  }
  svg.line(left, top + ph, left + pw, top + ph, "#222");
  svg.line(left, top, left, top + ph, "#222");
  svg.text(left + pw / 2, top + ph + 38, c.x_label, 12, "middle");
  svg.text(left - 56, top + ph / 2, c.y_label, 12, "middle", false, -90);
  bool any = false;
  for (size_t i = 0; i < c.series.size(); ++i) {
    const ChartSeries& s = c.series[i];
    const std::string col = palette[size_t(s.color) % std::size(palette)];
    std::vector<std::pair<double, double>> pts;
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y)) pts.push_back({X(x), Y(y)});
    any = any || !pts.empty();
    svg.polyline(pts, col, 2, s.dashed ? "6 4" : "", "series");
    if (s.markers)
      for (const auto& [x, y] : pts) svg.circle(x, y, 3, col);
    const double ly = top + ph + 58 + 16 * double(i);
    svg.line(left + 10, ly - 4, left + 40, ly - 4, col, 2, s.dashed ? "6 4" : "");
    svg.text(left + 48, ly, s.name, 11);
  }
  if (!any) svg.text(left + pw / 2, top + ph / 2, "no data", 13, "middle", false, 0, "#888");
  return svg.str();
}

}  // namespace tessera::plan
