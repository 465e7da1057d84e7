// `tessera plan --validate`: metrics files (run header + step lines, the
// schema in docs/planner.md) read back, each run predicted for its own
// layout, errors and their mean computed; bad input named.
#include <gtest/gtest.h>

#include "temp_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "tessera/core/error.h"
#include "tessera/plan/validate.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

const char* kSystem = R"(
name = "local"
[device]
memory_GB = 16.0
memory_bandwidth_GBps = 20.0
memory_efficiency = 1.0
peak_TFLOPs = { fp32 = 0.2 }
[node]
devices = 2
[gemm]
max_efficiency = 1.0
tile_m = 1
tile_n = 1
attention_efficiency = 0.2
[[network]]
ranks = 0
bandwidth_GBps = 5.0
latency_us = 1.0
)";

const char* kHeader =
    R"({"run": {"model": {"num_layers": 2, "hidden_size": 128, "num_heads": 4, "seq_length": 64,)"
    R"( "vocab_size": 512}, "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 4,)"
    R"( "global_batch": 8, "zero_stage": 0, "recompute": "none", "schedule": "1f1b"},)"
    R"( "memory_bytes": MEM, "threads": 2, "system": "local"}})";

std::string header(const std::string& mem, int64_t micro_batch = 4) {
  std::string h = kHeader;
  h.replace(h.find("MEM"), 3, mem);
  return h.replace(h.find("\"micro_batch\": 4"), 16,
                   "\"micro_batch\": " + std::to_string(micro_batch)) + "\n";
}

// Steps: two slow warm-ups, then 0.1, 0.3, 0.2 s (median 0.2).
std::string steps() {
  std::string s;
  const double t[] = {5.0, 4.0, 0.1, 0.3, 0.2};
  for (int i = 0; i < 5; ++i)
    s += "{\"step\": " + std::to_string(i + 1) + ", \"loss\": 3.0, \"step_seconds\": " +
         std::to_string(t[i]) + "}\n";
  return s;
}

}  // namespace

TEST(Validate, ReadsHeaderAndSkipsWarmup) {
  auto path = write_temp("a.jsonl", header(R"({"params": 1e6, "grads": 1e6, "optimizer": 2e6, "activations": 4e6})") + steps());
  RunMetrics r = read_run_metrics(path);
  EXPECT_EQ(r.model.hidden_size, 128);
  EXPECT_EQ(r.par.micro_batch, 4);
  EXPECT_EQ(r.threads, 2);
  ASSERT_TRUE(r.memory.has_value());
  EXPECT_DOUBLE_EQ(r.memory->total(), 8e6);
  EXPECT_EQ(r.step_seconds.size(), 5u);
  EXPECT_DOUBLE_EQ(median_step_seconds(r, 2), 0.2);
}

TEST(Validate, PerRankMemoryTakesTheLargest) {
  auto path = write_temp("b.jsonl",
                         header(R"([{"params": 1, "grads": 1, "optimizer": 1, "activations": 1},)"
                                R"( {"params": 2, "grads": 2, "optimizer": 2, "activations": 2}])") +
                             steps());
  EXPECT_DOUBLE_EQ(read_run_metrics(path).memory->total(), 8.0);
}

TEST(Validate, ErrorsAndMeanAgainstThePlanner) {
  auto sys_path = write_temp("local.toml", kSystem);
  SystemSpec sys = load_system_file(sys_path);
  auto a = write_temp("c.jsonl", header(R"({"params": 1e6, "grads": 1e6, "optimizer": 2e6, "activations": 4e6})") + steps());
  // A second layout (micro-batch 2): two checks, not one.
  auto b = write_temp("d.jsonl", header(R"({"params": 2e6, "grads": 1e6, "optimizer": 2e6, "activations": 4e6})", 2) + steps());
  Validation v = validate_runs({a, b}, sys);
  ASSERT_EQ(v.runs.size(), 2u);
  for (const auto& c : v.runs) {
    EXPECT_EQ(c.repeats, 1u);
    EXPECT_DOUBLE_EQ(c.measured_step, 0.2);
    EXPECT_NEAR(c.step_error, (c.predicted.time.step - 0.2) / 0.2, 1e-12);
    EXPECT_NEAR(c.memory_error, (c.predicted.peak_memory - c.measured_memory) / c.measured_memory, 1e-12);
  }
  EXPECT_EQ(v.runs[1].predicted.layout.par.micro_batch, 2);
  EXPECT_NE(v.runs[0].predicted.time.step, v.runs[1].predicted.time.step);
  EXPECT_NEAR(v.step_mape, (std::abs(v.runs[0].step_error) + std::abs(v.runs[1].step_error)) / 2, 1e-12);
  EXPECT_NEAR(v.memory_mape, (std::abs(v.runs[0].memory_error) + std::abs(v.runs[1].memory_error)) / 2, 1e-12);
  EXPECT_EQ(v.memory_runs, 2);
  const std::string text = format_validation(v, sys);
  EXPECT_NE(text.find("mean absolute error"), std::string::npos);
}

TEST(Validate, RepeatsOfALayoutArePooled) {
  // Two files of one layout: one check whose median spans both files' steps
  // after each file's warm-up: {0.1, 0.3, 0.2} and {0.6, 0.7, 0.5} -> 0.4.
  SystemSpec sys = load_system_file(write_temp("local.toml", kSystem));
  const std::string mem = R"({"params": 1e6, "grads": 1e6, "optimizer": 2e6, "activations": 4e6})";
  auto a = write_temp("p1.jsonl", header(mem) + steps());
  std::string slow = header(mem);
  const double t[] = {9.0, 9.0, 0.6, 0.7, 0.5};
  for (int i = 0; i < 5; ++i)
    slow += "{\"step\": " + std::to_string(i + 1) + ", \"step_seconds\": " + std::to_string(t[i]) + "}\n";
  auto b = write_temp("p2.jsonl", slow);
  Validation v = validate_runs({a, b}, sys);
  ASSERT_EQ(v.runs.size(), 1u);
  EXPECT_EQ(v.runs[0].repeats, 2u);
  EXPECT_EQ(v.runs[0].run.step_seconds.size(), 6u);
  EXPECT_DOUBLE_EQ(v.runs[0].measured_step, 0.4);
  EXPECT_NE(format_validation(v, sys).find("(+1 repeats)"), std::string::npos);
}

TEST(Validate, SeveralCalibrationsGiveTheMedianPrediction) {
  // Three calibrations of one drifting machine (peak 0.1, 0.2, 0.4 TFLOP/s):
  // each run is predicted on all three and the middle prediction compared.
  std::vector<SystemSpec> systems;
  for (const char* peak : {"0.4", "0.1", "0.2"}) {
    std::string text = kSystem;
    text.replace(text.find("fp32 = 0.2"), 10, std::string("fp32 = ") + peak);
    systems.push_back(load_system_file(write_temp(std::string("local_") + peak + ".toml", text)));
  }
  auto run = write_temp("m.jsonl", header(R"({"params": 1, "grads": 1, "optimizer": 1, "activations": 1})") + steps());
  Validation all = validate_runs({run}, systems);
  Validation middle = validate_runs({run}, systems[2]);
  ASSERT_EQ(all.runs.size(), 1u);
  EXPECT_EQ(all.systems, 3u);
  EXPECT_DOUBLE_EQ(all.runs[0].predicted.time.step, middle.runs[0].predicted.time.step);
  EXPECT_LT(validate_runs({run}, systems[0]).runs[0].predicted.time.step,
            all.runs[0].predicted.time.step);
  EXPECT_NE(format_validation(all, systems[0]).find("median over 3 calibrations"), std::string::npos);
}

TEST(Validate, TimeByKindOfWorkBesideThePrediction) {
  // seconds_by_op of each step (the engine's profile names) are read back,
  // their medians set beside the planner's prediction for the writing rank's
  // stage, and --by-op prints a line per kind.
  SystemSpec sys = load_system_file(write_temp("local.toml", kSystem));
  std::string text = header(R"({"params": 1, "grads": 1, "optimizer": 1, "activations": 1})");
  for (int i = 1; i <= 5; ++i)
    text += "{\"step\": " + std::to_string(i) + ", \"step_seconds\": 0.2, \"seconds_by_op\": "
            "{\"gemm\": " + std::to_string(0.1 * i) + ", \"loss\": 0.01, \"unknown\": 3}}\n";
  Validation v = validate_runs({write_temp("ops.jsonl", text)}, sys);
  ASSERT_EQ(v.runs.size(), 1u);
  const RunCheck& c = v.runs[0];
  EXPECT_NEAR(c.measured_ops[Op::Gemm], 0.4, 1e-12);  // median of 0.3, 0.4, 0.5
  EXPECT_NEAR(c.measured_ops[Op::Loss], 0.01, 1e-12);
  EXPECT_DOUBLE_EQ(c.measured_ops[Op::Attention], 0.0);
  EXPECT_EQ(c.stage, 0);
  // One rank, one stage: its kinds of work add up to the predicted step.
  EXPECT_GT(c.predicted_ops[Op::Gemm], 0.0);
  EXPECT_GT(c.predicted_ops[Op::Attention], 0.0);
  EXPECT_NEAR(c.predicted_ops.total(), c.predicted.time.step, 1e-9 * c.predicted.time.step);
  const std::string text_out = format_validation(v, sys, /*by_op=*/true);
  EXPECT_NE(text_out.find("gemm"), std::string::npos);
  EXPECT_NE(text_out.find("layernorm"), std::string::npos);
  EXPECT_EQ(format_validation(v, sys).find("layernorm"), std::string::npos);
}

TEST(Validate, BadInputIsNamed) {
  auto no_header = write_temp("e.jsonl", steps());
  EXPECT_THROW(read_run_metrics(no_header), Error);
  auto too_short = write_temp("f.jsonl", header(R"({"params": 1, "grads": 1, "optimizer": 1, "activations": 1})") +
                                            "{\"step\": 1, \"step_seconds\": 1.0}\n");
  RunMetrics r = read_run_metrics(too_short);
  EXPECT_THROW(median_step_seconds(r, 2), Error);
  auto garbage = write_temp("g.jsonl", "not json\n");
  EXPECT_TRUE(test::throws_error_with([&] { read_run_metrics(garbage); }, {"g.jsonl:1"}))
      << "a non-JSON line";
}

// A --bf16 run of the engine holds its fp32 master weights and their bf16
// working copy (6 bytes a parameter, DataParallel::memory), fp32 gradients
// and AdamW state: the prediction of its layout counts the same. Before,
// the planner counted the engine's weights at 4 bytes in either precision
// and a bf16 run's memory came out 6.7 % low (bench/planner_validation.sh).
TEST(Validate, EngineBf16RunCountsTheWorkingCopy) {
  SystemSpec sys = load_system_file(write_temp("local.toml", kSystem));
  std::string h = header(R"({"params": 1, "grads": 1, "optimizer": 1, "activations": 1})");
  h.replace(h.find("\"threads\""), 0, "\"precision\": \"bf16\", ");
  const RunMetrics r = read_run_metrics(write_temp("bf16.jsonl", h + steps()));
  ASSERT_EQ(r.precision, "bf16");
  const Validation v = validate_runs({write_temp("bf16.jsonl", h + steps())}, sys);
  ASSERT_EQ(v.runs.size(), 1u);
  const LayoutCost& c = v.runs[0].predicted;
  ASSERT_EQ(c.stages.size(), 1u);
  const double params = double(c.stages[0].params);
  EXPECT_DOUBLE_EQ(c.stages[0].state.params, 6 * params);
  EXPECT_DOUBLE_EQ(c.stages[0].state.grads, 4 * params);
  EXPECT_DOUBLE_EQ(c.stages[0].state.optimizer, 8 * params);
}
