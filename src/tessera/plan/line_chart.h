// Line charts as SVG, for curves over steps, tokens or time (`tessera plot`):
// a frame with "nice" ticks on both axes, axis labels with units, one
// polyline per series (class "series", so tests can count them) and a
// legend below the frame.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tessera::plan {

struct ChartSeries {
  std::string name;                              // legend text
  std::vector<std::pair<double, double>> points; // (x, y), x ascending
  bool dashed = false;                           // e.g. validation beside training
  bool markers = false;                          // a dot at each point (sparse series)
  int color = 0;                                 // index into the palette (runs share colours)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
};

// The chart; a chart with no point at all says so inside the frame.
std::string svg_line_chart(const LineChart& chart);

}  // namespace tessera::plan
