#include "tessera/plan/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessera::plan {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

namespace {
std::string cls_attr(const std::string& cls) {
  return cls.empty() ? "" : fmt::format(" class=\"{}\"", xml_escape(cls));
}
}  // namespace

void Svg::rect(double x, double y, double w, double h, const std::string& fill,
               const std::string& cls, const std::string& title) {
  body_ += fmt::format("<rect{} x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"",
                       cls_attr(cls), x, y, std::max(w, 0.0), std::max(h, 0.0), fill);
  // A tooltip in viewers that show <title>.
  if (title.empty()) body_ += "/>\n";
  else body_ += fmt::format("><title>{}</title></rect>\n", xml_escape(title));
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width,
               const std::string& dash) {
  body_ += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
                       "stroke-width=\"{}\"{}/>\n",
                       x1, y1, x2, y2, stroke, width,
                       dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", dash));
}

void Svg::polyline(const std::vector<std::pair<double, double>>& pts, const std::string& stroke,
                   double width, const std::string& dash, const std::string& cls) {
  std::string p;
  for (const auto& [x, y] : pts) p += fmt::format("{:.1f},{:.1f} ", x, y);
  body_ += fmt::format("<polyline{} points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
                       cls_attr(cls), p, stroke, width,
                       dash.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", dash));
}

void Svg::circle(double x, double y, double r, const std::string& fill) {
  body_ += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n", x, y, r, fill);
}

double text_width(const std::string& s, double size) {
  // UTF-8 continuation bytes are not characters of their own.
  size_t chars = 0;
  for (unsigned char ch : s) chars += (ch & 0xC0) != 0x80;
  return 0.6 * size * double(chars);
}

void Svg::text(double x, double y, const std::string& s, double size, const std::string& anchor,
               bool bold, double rotate, const std::string& fill) {
  // Where the text reaches, for str() to keep it inside the frame (rotated
  // text: its length runs vertically).
  const double w = text_width(s, size);
  const double start = anchor == "middle" ? -w / 2 : anchor == "end" ? -w : 0;
  if (rotate == 0) {
    min_x_ = std::min(min_x_, x + start), max_x_ = std::max(max_x_, x + start + w);
    min_y_ = std::min(min_y_, y - size), max_y_ = std::max(max_y_, y + 0.3 * size);
  } else {
    min_y_ = std::min(min_y_, y - start - w), max_y_ = std::max(max_y_, y - start);
    min_x_ = std::min(min_x_, x - size), max_x_ = std::max(max_x_, x + 0.3 * size);
  }
  body_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\"{}{}>{}</text>\n",
                       x, y, size, anchor, fill, bold ? " font-weight=\"bold\"" : "",
                       rotate != 0 ? fmt::format(" transform=\"rotate({} {:.1f} {:.1f})\"", rotate, x, y) : "",
                       xml_escape(s));
}

std::string Svg::str() const {
  // The frame grows (on any side) to hold every text with a margin: a long
  // title never runs out of it.
  constexpr double kMargin = 6;
  const double x0 = std::min(0.0, std::floor(min_x_ - kMargin));
  const double y0 = std::min(0.0, std::floor(min_y_ - kMargin));
  const double x1 = std::max(width_, std::ceil(max_x_ + kMargin));
  const double y1 = std::max(height_, std::ceil(max_y_ + kMargin));
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{2}\" height=\"{3}\" viewBox=\"{0} {1} {2} {3}\" "
      "font-family=\"Helvetica, Arial, sans-serif\">\n"
      "<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" fill=\"white\"/>\n{4}</svg>\n",
      x0, y0, x1 - x0, y1 - y0, body_);
}

std::string ramp_color(double t) {
  // viridis at 0, .25, .5, .75, 1
  static const double stops[5][3] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int i = std::min(3, int(t));
  const double f = t - i;
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = int(std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string ramp_text_color(double t) { return t > 0.55 ? "#111" : "#fff"; }

std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(n, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + 1e-9 * step; v += step)
    t.push_back(std::abs(v) < 1e-12 * step ? 0.0 : v);  // never "-0"
  return t;
}

}  // namespace tessera::plan
