// The planner's SVG charts: well-formed XML (checked by a minimal parser,
// no dependency) with one element per heat-map cell, per stacked-bar
// segment and per scaling curve.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "tessera/plan/model_presets.h"
#include "tessera/plan/plots.h"
#include "tessera/plan/svg.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

// Checks tags nest and close, attribute values are quoted, and text holds no
// raw '<' or bare '&'. Returns "" or what is wrong and where.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] == '<') {
      const bool closing = s[i + 1] == '/';
      size_t j = i + (closing ? 2 : 1), name_end = j;
      while (name_end < s.size() && (isalnum(s[name_end]) || s[name_end] == '-')) ++name_end;
      const std::string name = s.substr(j, name_end - j);
      if (name.empty()) return "empty tag name at " + std::to_string(i);
      // Scan attributes to '>' honouring quotes.
      size_t k = name_end;
      char quote = 0;
      for (; k < s.size(); ++k) {
        if (quote) {
          if (s[k] == quote) quote = 0;
          else if (s[k] == '<') return "'<' inside an attribute at " + std::to_string(k);
        } else if (s[k] == '"' || s[k] == '\'') {
          if (s[k - 1] != '=') return "stray quote at " + std::to_string(k);
          quote = s[k];
        } else if (s[k] == '>') {
          break;
        }
      }
      if (k == s.size()) return "unterminated tag " + name;
      const bool self_closing = s[k - 1] == '/';
      if (closing) {
        if (open.empty() || open.back() != name) return "</" + name + "> does not close its element";
        open.pop_back();
      } else if (!self_closing) {
        open.push_back(name);
      }
      i = k + 1;
    } else {
      if (s[i] == '&') {
        size_t semi = s.find(';', i);
        const std::string ent = s.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
          return "bare '&' at " + std::to_string(i);
      }
      if (!open.empty() || isspace(s[i])) {
        ++i;
        continue;
      }
      return "text outside the root at " + std::to_string(i);
    }
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  return "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

SystemSpec frontier() {
  return load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/frontier.toml");
}

void keep(const std::string& name, const std::string& svg) {  // for a person to look at
  std::ofstream(std::filesystem::temp_directory_path() / name) << svg;
}

}  // namespace

TEST(Svg, ParserCatchesBrokenDocuments) {
  EXPECT_EQ(xml_problem("<svg><rect x=\"1\"/><text>a &amp; b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg><rect x=\"1/></svg>"), "");
}

TEST(Svg, EscapesText) {
  Svg s(10, 10);
  s.text(1, 1, "tp < 4 & \"pp\" > 2");
  EXPECT_EQ(xml_problem(s.str()), "");
}

TEST(Svg, HeatMapHasOneCellPerTpPp) {
  const SystemSpec sys = frontier();
  const GPTConfig m = load_model("gpt3-2.7b");
  SearchSpace space;
  space.devices = 16;
  space.global_batch = 64;
  HeatMap h = heatmap_tp_pp(m, sys, space, "gpt3-2.7b on 16 GCDs");
  ASSERT_GE(h.tp.size(), 3u);
  ASSERT_GE(h.pp.size(), 3u);
  const std::string svg = svg_heatmap(h);
  keep("tessera_heatmap.svg", svg);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "class=\"cell\""), h.tp.size() * h.pp.size());
  int filled = 0;
  for (const auto& row : h.cells)
    for (const auto& c : row) filled += c.tokens_per_second.has_value();
  EXPECT_GT(filled, 0);
  EXPECT_LT(filled, int(h.tp.size() * h.pp.size()));  // tp 8 x pp 8 > 16 devices: no layout
}

TEST(Svg, MemoryHasOneSegmentPerStageAndKind) {
  const SystemSpec sys = frontier();
  PlanLayout L;
  L.par.tp = 4, L.par.pp = 16, L.par.dp = 2, L.par.micro_batch = 1, L.par.global_batch = 1280;
  L.par.zero_stage = 1, L.par.recompute = Recompute::Full;
  const LayoutCost c = evaluate_layout(load_model("frontier-175b"), sys, L);
  ASSERT_EQ(c.stages.size(), 16u);
  const std::string svg = svg_memory_stages(c, sys, "175B, 128 GCDs");
  keep("tessera_memory.svg", svg);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "class=\"bar\""), 16u * 4u);  // weights, grads, optimizer, activations
}

TEST(Svg, ScalingHasTheStudysFourCurves) {
  const auto curves = study_scaling(frontier());
  ASSERT_EQ(curves.size(), 4u);
  const std::string svg = svg_scaling(curves, "scaling");
  keep("tessera_scaling.svg", svg);
  EXPECT_EQ(xml_problem(svg), "");
  EXPECT_EQ(count(svg, "class=\"curve\""), 4u);
}
