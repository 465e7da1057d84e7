// A minimal SVG writer for the planner's charts: shapes and text appended to
// a string, nothing else. Hand-written so plots need no dependency.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tessera::plan {

class Svg {
 public:
  Svg(double width, double height);

  // `cls` becomes the element's class (tests count cells and bars by it).
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& cls = "", const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1, const std::string& dash = "");
  void polyline(const std::vector<std::pair<double, double>>& pts, const std::string& stroke,
                double width, const std::string& dash = "", const std::string& cls = "");
  void circle(double x, double y, double r, const std::string& fill);
  // anchor: start | middle | end. rotate: degrees about (x, y).
  void text(double x, double y, const std::string& s, double size = 12,
            const std::string& anchor = "start", bool bold = false, double rotate = 0,
            const std::string& fill = "#222");

  std::string str() const;  // the document, closed

 private:
  double width_, height_;
  std::string body_;
  // The extent of the texts drawn (estimated, text_width): str() widens the
  // frame to hold them.
  double min_x_ = 0, min_y_ = 0, max_x_ = 0, max_y_ = 0;
};

// The width of `s` at font size `size`, estimated on the wide side (0.6 em
// per character; Helvetica's average is about 0.55).
double text_width(const std::string& s, double size);
// "&", "<", ">", quotes escaped for text and attribute values.
std::string xml_escape(const std::string& s);
// A perceptually ordered ramp (viridis, 5 stops interpolated), t in [0, 1].
std::string ramp_color(double t);
// Text colour readable on `ramp_color(t)`.
std::string ramp_text_color(double t);
// "Nice" tick values covering [lo, hi]: about `n` steps of 1, 2 or 5 x 10^k.
std::vector<double> nice_ticks(double lo, double hi, int n);

}  // namespace tessera::plan
