// The planner a user can trust (issue 13, part 4): model files in
// `tessera train`'s key names with unknown keys refused, the preset names
// people type, a layout that does not fit keeps its predicted time and says
// how far over memory it is (table, JSON, heat map), the table aligned
// within 100 columns, chart text inside the frame, and the warning when a
// calibration's ranks x threads differ from a run's.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "expect_error.h"
#include "temp_file.h"
#include "tessera/model/param_layout.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/plots.h"
#include "tessera/plan/report.h"
#include "tessera/plan/search.h"
#include "tessera/plan/svg.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

SystemSpec frontier() {
  return load_system(std::string(TESSERA_SOURCE_DIR) + "/configs/systems/frontier.toml");
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// frontier-175b on one GCD with this layout: far over 62 GB.
PlanLayout one_device() {
  PlanLayout L;
  L.par.micro_batch = 1, L.par.global_batch = 8;
  return L;
}

}  // namespace

TEST(ModelFile, TakesTrainsKeyNames) {
  const std::string f = write_temp("usability_model.toml",
                                   "num-layers = 3\nhidden-size = 96\nnum-attention-heads = 4\n"
                                   "seq-length = 64\nvocab-size = 1000\nffn-hidden-size = 200\n");
  const GPTConfig m = load_model_file(f);
  EXPECT_EQ(m.num_layers, 3);
  EXPECT_EQ(m.hidden_size, 96);
  EXPECT_EQ(m.num_heads, 4);
  EXPECT_EQ(m.seq_length, 64);
  EXPECT_EQ(m.vocab_size, 1000);
  EXPECT_EQ(m.ffn_hidden_size, 200);
}

TEST(ModelFile, UnknownKeyIsAnErrorNamingFileAndKey) {
  const std::string f = write_temp("usability_unknown.toml",
                                   "num-layers = 3\nhidden-size = 96\nnum-attention-heads = 4\n"
                                   "seq-length = 64\nnum-layerz = 2\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(f); }, {f, "unknown key 'num-layerz'"}));
  // Older files: snake_case in [model]; a typo there is refused too.
  const std::string old = write_temp("usability_old.toml",
                                     "[model]\nnum_layers = 3\nhidden_size = 96\nnum_heads = 4\n"
                                     "seq_length = 64\nhiden_size = 5\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(old); }, {old, "'hiden_size'"}));
}

TEST(ModelFile, OtherTrainKeysPassOnlyWhenTheCallerKnowsThem) {
  // A train --config file is a model file: `lr` is train's, not a typo.
  const std::string f = write_temp("usability_train.toml",
                                   "num-layers = 2\nhidden-size = 64\nnum-attention-heads = 4\n"
                                   "seq-length = 32\nlr = 0.001\n");
  EXPECT_TRUE(test::throws_error_with([&] { load_model_file(f); }, {"unknown key 'lr'"}));
  const GPTConfig m = load_model_file(f, [](const std::string& k) { return k == "lr"; });
  EXPECT_EQ(m.num_layers, 2);
  EXPECT_EQ(m.vocab_size, 50257);  // GPT-2's unless the file says
}

TEST(ModelPresets, NamesPeopleType) {
  const GPTConfig a = load_model("175B"), b = load_model("frontier-175b"), c = load_model("GPT3-175B");
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(c.hidden_size, 12288);
  EXPECT_EQ(load_model("1T").hidden_size, 25600);
  EXPECT_TRUE(test::throws_error_with([] { load_model("176B"); }, {"unknown preset '176B'"}));
}

TEST(OverMemory, ALayoutThatDoesNotFitKeepsItsTimeAndSaysByHowMuch) {
  const SystemSpec sys = frontier();
  const LayoutCost c = evaluate_layout(load_model("frontier-175b"), sys, one_device());
  ASSERT_FALSE(c.fits);
  EXPECT_GT(c.time.step, 0);
  EXPECT_GT(c.tokens_per_second, 0);
  EXPECT_DOUBLE_EQ(c.over_memory, c.peak_memory - sys.usable_memory());
  EXPECT_GT(c.over_memory, 1e12);  // 175B on one device: terabytes
  EXPECT_EQ(over_memory_text(c), fmt::format("+{:.1f} GB over", c.over_memory / 1e9));
  const auto j = layout_json(c);
  EXPECT_DOUBLE_EQ(j["over_memory_bytes"].get<double>(), c.over_memory);
  EXPECT_GT(j["step_seconds"].get<double>(), 0);
  // In the table, in place of the overheads.
  const std::string t = format_miss_table({c}, 1);
  EXPECT_NE(t.find(over_memory_text(c)), std::string::npos) << t;
  EXPECT_NE(format_table({c}, 1).find("GB over"), std::string::npos);
  // A fitting layout says nothing.
  PlanLayout fits;
  fits.par.micro_batch = 1, fits.par.global_batch = 8;
  EXPECT_EQ(over_memory_text(evaluate_layout(load_model("gpt2-small"), sys, fits)), "");
}

TEST(OverMemory, SmallExcessIsNotRoundedToZero) {
  LayoutCost c;
  c.fits = false;
  c.over_memory = 3e6;
  EXPECT_EQ(over_memory_text(c), "+3.0 MB over");
}

TEST(OverMemory, SearchGivesTheClosestMissesExactTimes) {
  SearchSpace sp;
  sp.devices = 8;
  sp.global_batch = 8;
  const SearchResult r = search_layouts(load_model("frontier-175b"), frontier(), sp);
  ASSERT_TRUE(r.ranked.empty());
  ASSERT_FALSE(r.closest_misses.empty());
  for (const LayoutCost& c : r.closest_misses) {
    EXPECT_FALSE(c.fits);
    EXPECT_GT(c.over_memory, 0);
    EXPECT_GT(c.time.step, 0);
    EXPECT_EQ(c.stages.size(), size_t(c.layout.par.pp));  // every stage: the exact pass
  }
}

TEST(Table, AlignedWithin100Columns) {
  SearchSpace sp;
  sp.devices = 1024;
  sp.global_batch = 1280;
  const SearchResult r = search_layouts(load_model("frontier-175b"), frontier(), sp);
  const auto lines = lines_of(format_table(r.ranked, 10));
  ASSERT_EQ(lines.size(), 11u);
  for (const std::string& l : lines) {
    EXPECT_LE(l.size(), 100u) << l;
    EXPECT_EQ(l.size(), lines.front().size()) << "not aligned:\n" << l << "\n" << lines.front();
  }
  // The misses' table too, with the "over memory" column.
  for (const std::string& l : lines_of(format_miss_table(r.closest_misses, 3)))
    EXPECT_LE(l.size(), 100u) << l;
}

TEST(Calibration, WarnsWhenRanksTimesThreadsDiffer) {
  const SystemSpec sys = load_system_text(
      "name = \"cal\"\n[calibration]\nranks = 2\nthreads = 1\n"
      "[device]\nname = \"cpu\"\nmemory_GB = 10\nmemory_bandwidth_GBps = 10\n"
      "memory_efficiency = 1\npeak_TFLOPs = { fp32 = 0.1 }\n[node]\ndevices = 2\n"
      "[[network]]\nname = \"n\"\nranks = 0\nbandwidth_GBps = 1\nlatency_us = 1\n",
      "cal.toml");
  EXPECT_EQ(sys.calibrated_ranks, 2);
  EXPECT_EQ(sys.calibrated_threads, 1);
  EXPECT_EQ(calibration_mismatch(sys, 2, 1), "");
  const std::string w = calibration_mismatch(sys, 1, 2);
  EXPECT_NE(w.find("calibrated with 2 rank(s) x 1 thread(s), this run has 1 x 2"),
            std::string::npos)
      << w;
  EXPECT_EQ(calibration_mismatch(sys, 1, 0), "");  // threads unknown: nothing to say
  EXPECT_EQ(calibration_mismatch(frontier(), 4, 7), "");  // not a calibration
}

// The shipped local.toml is one machine's calibration: planning on it on
// another CPU says so (its lines within 100 columns after "warning: ").
TEST(Calibration, WarnsWhenTheCalibrationIsAnotherCpus) {
  const SystemSpec sys = load_system_text(
      "name = \"local\"\n[calibration]\nranks = 2\nthreads = 1\n"
      "[device]\nname = \"Intel(R) Xeon(R) Processor\"\nmemory_GB = 10\n"
      "memory_bandwidth_GBps = 10\nmemory_efficiency = 1\npeak_TFLOPs = { fp32 = 0.1 }\n"
      "[node]\ndevices = 2\n"
      "[[network]]\nname = \"n\"\nranks = 0\nbandwidth_GBps = 1\nlatency_us = 1\n",
      "local.toml");
  EXPECT_EQ(foreign_calibration(sys, "Intel(R) Xeon(R) Processor"), "");
  const std::string w = foreign_calibration(sys, "AMD EPYC");
  EXPECT_NE(w.find("calibrated on another CPU: Intel(R) Xeon(R) Processor\n"
                   "  this machine's: AMD EPYC"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("tessera calibrate"), std::string::npos) << w;
  for (const std::string& l : lines_of(w)) EXPECT_LE(l.size() + 9, 100u) << l;
  EXPECT_EQ(foreign_calibration(frontier(), "AMD EPYC"), "");  // a datasheet system
}

TEST(Charts, LongTitlesStayInsideTheFrame) {
  const std::string title(140, 'x');
  HeatMap h;
  h.title = title;
  h.tp = {1};
  h.pp = {1};
  h.cells = {{HeatMap::Cell{}}};
  h.cells[0][0].why_none = "no layout";
  const std::string svg = svg_heatmap(h);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("viewBox=\"([-0-9.]+) ([-0-9.]+) ([0-9.]+) ")));
  const double x0 = std::stod(m[1]), width = std::stod(m[3]);
  EXPECT_GE(width, text_width(title, 15)) << "a 140-character title in a one-cell chart";
  EXPECT_LE(x0, 0);
  // Any text that would run out of a fixed frame grows it.
  Svg s(100, 50);
  s.text(95, 20, "a long label running out on the right", 12);
  s.text(5, 40, "and one on the left", 12, "end");
  const std::string small = s.str();
  ASSERT_TRUE(std::regex_search(small, m, std::regex("viewBox=\"([-0-9.]+) ([-0-9.]+) ([0-9.]+) ")));
  EXPECT_LE(std::stod(m[1]), 5 - text_width("and one on the left", 12));
  EXPECT_GE(std::stod(m[1]) + std::stod(m[3]), 95 + text_width("a long label running out on the right", 12));
}

TEST(Charts, EmptyCellsSayWhy) {
  // 175B on 8 GCDs: some (tp, pp) have no valid layout, the others do not fit.
  SearchSpace sp;
  sp.devices = 8;
  sp.global_batch = 8;
  const HeatMap h = heatmap_tp_pp(load_model("frontier-175b"), frontier(), sp, "175B on 8");
  int no_fit = 0;
  for (const auto& row : h.cells)
    for (const auto& c : row) {
      EXPECT_FALSE(c.tokens_per_second.has_value());
      if (c.why_none == "does not fit") {
        ++no_fit;
        EXPECT_NE(c.over.find("GB over"), std::string::npos);
      } else {
        EXPECT_EQ(c.why_none, "no layout");
      }
    }
  EXPECT_GT(no_fit, 0);
  const std::string svg = svg_heatmap(h);
  EXPECT_NE(svg.find(">does not fit<"), std::string::npos);
  EXPECT_NE(svg.find("GB over<"), std::string::npos);
}
