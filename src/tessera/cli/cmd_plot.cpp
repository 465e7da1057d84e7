// `tessera plot METRICS.jsonl... --output DIR`: the curves of one or more
// `tessera train --metrics-file` runs as SVG charts, runs overlaid in one
// colour each: loss (training solid, validation dashed with markers)
// against steps and against tokens, throughput against steps, and MFU
// against steps when the runs know their peak.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/core.h>

#include "tessera/cli/commands.h"
#include "tessera/core/error.h"
#include "tessera/core/output_file.h"
#include "tessera/plan/line_chart.h"
#include "tessera/plan/run_metrics.h"

namespace tessera::cli {

namespace {

struct PlotArgs {
  std::vector<std::string> files;
  std::string output = "plots";
};

// (x, y) of the steps where both are known; x accumulated when `cumulative`.
std::vector<std::pair<double, double>> curve(const plan::RunMetrics& r,
                                             const std::vector<double>& y, bool by_tokens) {
  std::vector<std::pair<double, double>> pts;
  double tokens = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    if (std::isfinite(r.tokens[i])) tokens += r.tokens[i];
    const double x = by_tokens ? tokens : double(r.steps[i]);
    if (std::isfinite(y[i])) pts.push_back({x, y[i]});
  }
  return pts;
}

void write_chart(const std::string& dir, const std::string& name, const plan::LineChart& c) {
  const std::string path = dir + "/" + name;
  write_output_file(path, plan::svg_line_chart(c), "--output");
  fmt::print("wrote {}\n", path);
}

void run_plot(const PlotArgs& a) {
  std::vector<plan::RunMetrics> runs;
  for (const auto& f : a.files) runs.push_back(plan::read_run_metrics(f));  // all checked first
  std::error_code ec;
  std::filesystem::create_directories(a.output, ec);
  TESSERA_CHECK(std::filesystem::is_directory(a.output), "--output {}: cannot create the directory",
                a.output);
  auto name = [](const plan::RunMetrics& r) { return std::filesystem::path(r.path).stem().string(); };

  for (const bool by_tokens : {false, true}) {
    plan::LineChart c{.title = by_tokens ? "Loss against tokens" : "Loss against steps",
                      .x_label = by_tokens ? "tokens trained" : "step",
                      .y_label = "loss (nats per token)"};
    for (size_t i = 0; i < runs.size(); ++i) {
      c.series.push_back({.name = name(runs[i]) + " training",
                          .points = curve(runs[i], runs[i].loss, by_tokens), .color = int(i)});
      auto valid = curve(runs[i], runs[i].valid_loss, by_tokens);
      if (!valid.empty())
        c.series.push_back({.name = name(runs[i]) + " validation", .points = valid,
                            .dashed = true, .markers = true, .color = int(i)});
    }
    write_chart(a.output, by_tokens ? "loss_tokens.svg" : "loss.svg", c);
  }
  plan::LineChart tput{.title = "Throughput", .x_label = "step", .y_label = "tokens per second"};
  plan::LineChart mfu{.title = "Model FLOPs utilisation", .x_label = "step",
                      .y_label = "MFU (% of the peak each run states)"};
  bool any_mfu = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    tput.series.push_back(
        {.name = name(runs[i]), .points = curve(runs[i], runs[i].tokens_per_second, false), .color = int(i)});
    auto m = curve(runs[i], runs[i].mfu, false);
    for (auto& p : m) p.second *= 100;
    any_mfu = any_mfu || !m.empty();
    mfu.series.push_back({.name = name(runs[i]), .points = m, .color = int(i)});
  }
  write_chart(a.output, "throughput.svg", tput);
  if (any_mfu) write_chart(a.output, "mfu.svg", mfu);
  else fmt::print("no MFU chart: no run recorded a peak (--peak-tflops or `tessera bench peak`)\n");
}

}  // namespace

void register_plot(CLI::App& app) {
  auto a = std::make_shared<PlotArgs>();
  auto* cmd = app.add_subcommand(
      "plot", "SVG charts of `tessera train --metrics-file` runs: loss (training and validation) "
              "against steps and tokens, throughput, MFU");
  cmd->add_option("files", a->files, "metrics files (JSONL), one run each")->required();
  cmd->add_option("--output", a->output, "directory for the SVG files")->capture_default_str();
  cmd->callback([a] { run_plot(*a); });
}

}  // namespace tessera::cli
