// `tessera calibrate`: the shapes it measures are the ones the planner asks
// for, the file it writes loads, and `tessera plan` runs on it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessera/core/error.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/plan/calibrate.h"
#include "tessera/plan/gemm_model.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/model_presets.h"
#include "tessera/plan/system.h"

using namespace tessera;
using namespace tessera::plan;

namespace {

std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / "tessera_test_calibrate";
  std::filesystem::create_directories(d);
  return d;
}

// A calibration as if measured: memory, bandwidth, attention and two GEMMs.
Calibration synthetic_calibration() {
  Calibration c;
  c.cpu = "Test CPU";
  c.memory_bytes = 16e9, c.triad_bandwidth = 10e9, c.peak_gemm = 200e9;
  c.attention_efficiency = 0.25;
  c.gemm = {{256, 768, 256, 150e9}, {2048, 1024, 256, 200e9}};
  return c;
}

int run(const std::string& args) {
  std::string cmd = std::string(TESSERA_BINARY) + " " + args + " > /dev/null 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace

// Each linear contributes forward, input gradient and weight gradient, named
// as layout_cost.cpp names them: {m, n, k}, {m, k, n}, {k, n, m}.
TEST(Calibrate, ShapesFollowThePlannersConvention) {
  GPTConfig m;
  m.num_layers = 2, m.hidden_size = 64, m.num_heads = 4, m.seq_length = 32, m.vocab_size = 300;
  auto s = training_gemm_shapes(m, 2, 2);
  ASSERT_EQ(s.size(), 15u);  // 5 linears x 3
  // QKV forward: rows 64, out 3h/t = 96, in 64; sgemm N,T with the same sizes.
  EXPECT_EQ(s[0].m, 64);
  EXPECT_EQ(s[0].n, 96);
  EXPECT_EQ(s[0].k, 64);
  EXPECT_EQ(s[0].ta, 'N');
  EXPECT_EQ(s[0].tb, 'T');
  // Its input gradient {m, k, n} and weight gradient {k, n, m}.
  EXPECT_EQ(s[1].m, 64);
  EXPECT_EQ(s[1].n, 64);
  EXPECT_EQ(s[1].k, 96);
  EXPECT_EQ(s[2].m, 64);
  EXPECT_EQ(s[2].n, 96);
  EXPECT_EQ(s[2].k, 64);
  EXPECT_EQ(s[2].M, 96);
  EXPECT_EQ(s[2].K, 64);  // the engine computes dW (out, in);
  // LM head: vocab padded to 128 * tp = 512, 256 per rank.
  EXPECT_EQ(s[12].n, 256);
  for (const auto& x : s) EXPECT_DOUBLE_EQ(x.flops(), 2.0 * double(x.M) * x.N * x.K);

  // The model's own widths, from its traced op list: GQA's qkv (4 query
  // heads and 2 + 2 key/value heads of 16) and SwiGLU's [gate | up] (2 F).
  GPTConfig llama = m;
  llama.num_query_groups = 2;
  llama.swiglu = true;
  llama.normalization = Normalization::RMSNorm;
  llama.add_bias_linear = false;
  const auto l = training_gemm_shapes(llama, 2, 1);
  ASSERT_EQ(l.size(), 15u);
  EXPECT_EQ(l[0].n, (4 + 2 * 2) * 16);  // qkv forward
  EXPECT_EQ(l[6].n, 2 * llama.ffn());   // fc forward
  EXPECT_EQ(l[9].m, 64);                // proj forward: rows, h, F
  EXPECT_EQ(l[9].k, llama.ffn());
}

// A synthetic calibration written and read back: every number survives, the
// planner's GEMM model uses the table, and one rank means a placeholder tier.
TEST(Calibrate, WrittenFileLoads) {
  Calibration c = synthetic_calibration();
  c.cpu = "Test \"CPU\"";
  c.threads = 2, c.ranks = 1, c.devices_per_node = 1;
  auto path = temp_dir() / "synthetic.toml";
  std::ofstream(path) << calibration_toml(c);
  SystemSpec s = load_system_file(path.string());
  EXPECT_EQ(s.name, "local");
  EXPECT_NEAR(s.peak_flops_32, 200e9, 1e6);
  EXPECT_NEAR(s.memory_bandwidth, 10e9, 1e6);
  EXPECT_NEAR(s.attention_efficiency, 0.25, 1e-6);
  ASSERT_EQ(s.gemm_measured.size(), 2u);
  ASSERT_EQ(s.tiers.size(), 1u);
  EXPECT_EQ(s.tiers[0].ranks, 0);
  // An exactly measured shape takes exactly its measured time.
  EXPECT_NEAR(gemm_seconds(s, Precision::Fp32, {256, 768, 256}), 2.0 * 256 * 768 * 256 / 150e9, 1e-12);

  c.ranks = 2, c.devices_per_node = 2;
  c.network = NetworkMeasure{2e-6, 5e9};
  std::ofstream(path) << calibration_toml(c);
  s = load_system_file(path.string());
  EXPECT_EQ(s.devices_per_node, 2);
  EXPECT_NEAR(s.tiers[0].latency, 2e-6, 1e-9);
  EXPECT_NEAR(s.tiers[0].bandwidth, 5e9, 1e3);
}

// The bf16 and fp16 GEMM tables: written beside the sgemm one with their
// peaks, read back, and each used for its own precision's layouts only;
// without its table a 16-bit GEMM takes the fp32 one (a CPU without 16-bit
// units), never the other 16-bit precision's.
TEST(Calibrate, Bf16AndFp16TablesPriceTheirOwnPrecision) {
  Calibration c = synthetic_calibration();
  auto path = temp_dir() / "bf16.toml";
  std::ofstream(path) << calibration_toml(c);
  SystemSpec fp32_only = load_system_file(path.string());
  EXPECT_TRUE(fp32_only.gemm_measured_bf16.empty());
  EXPECT_TRUE(fp32_only.gemm_measured_fp16.empty());
  const GemmShape g{256, 768, 256};
  const double flops = 2.0 * 256 * 768 * 256;
  const double fp32_seconds = flops / 150e9;
  EXPECT_NEAR(gemm_seconds(fp32_only, Precision::Bf16, g), fp32_seconds, 1e-12);
  EXPECT_NEAR(gemm_seconds(fp32_only, Precision::Fp16, g), fp32_seconds, 1e-12);

  c.gemm_bf16 = {{256, 768, 256, 300e9}, {2048, 1024, 256, 450e9}};
  c.peak_gemm_bf16 = 450e9;
  std::ofstream(path) << calibration_toml(c);
  SystemSpec s = load_system_file(path.string());
  ASSERT_EQ(s.gemm_measured_bf16.size(), 2u);
  EXPECT_TRUE(s.gemm_measured_fp16.empty());
  EXPECT_NEAR(s.peak_flops_bf16, 450e9, 1e6);
  EXPECT_NEAR(s.peak_flops_32, 200e9, 1e6);
  EXPECT_NEAR(gemm_seconds(s, Precision::Fp32, g), fp32_seconds, 1e-12);
  EXPECT_NEAR(gemm_seconds(s, Precision::Bf16, g), flops / 300e9, 1e-12);
  EXPECT_NEAR(gemm_seconds(s, Precision::Fp16, g), fp32_seconds, 1e-12);  // not bf16's

  // This CPU's fp16: operands widened to fp32, a little slower than sgemm.
  c.gemm_fp16 = {{256, 768, 256, 140e9}, {2048, 1024, 256, 190e9}};
  c.peak_gemm_fp16 = 190e9;
  std::ofstream(path) << calibration_toml(c);
  s = load_system_file(path.string());
  ASSERT_EQ(s.gemm_measured_fp16.size(), 2u);
  EXPECT_NEAR(s.peak_flops_fp16, 190e9, 1e6);
  EXPECT_NEAR(s.peak_flops_bf16, 450e9, 1e6);
  EXPECT_NEAR(gemm_seconds(s, Precision::Fp16, g), flops / 140e9, 1e-12);
  EXPECT_NEAR(gemm_seconds(s, Precision::Bf16, g), flops / 300e9, 1e-12);
}

// In-situ factors per micro-batch: [in_situ] is the smallest micro-batch's
// (calibration.in_situ_micro_batch), [in_situ_mb8] and [in_situ_mb8_bf16]
// another's; a layout takes the measured micro-batch nearest its own in
// ratio (a tie: the larger), a precision missing there takes that
// micro-batch's fp32 table, and a file without the key keeps one table.
TEST(Calibrate, InSituFactorsPerMicroBatch) {
  Calibration c = synthetic_calibration();
  c.in_situ_batch = 2;
  c.in_situ[Op::Gemm] = 1.2;
  c.in_situ_lowp[Precision::Bf16] = SystemSpec::unit_factors();
  c.in_situ_lowp[Precision::Bf16][Op::Gemm] = 1.5;
  Profile at8 = SystemSpec::unit_factors();
  at8[Op::Gemm] = 1.01;
  c.in_situ_at[8][Precision::Fp32] = at8;
  at8[Op::Gemm] = 1.05;
  c.in_situ_at[8][Precision::Bf16] = at8;
  const std::string text = calibration_toml(c);
  EXPECT_NE(text.find("in_situ_micro_batch = 2\n"), std::string::npos);
  EXPECT_NE(text.find("[in_situ_mb8]\n"), std::string::npos);
  EXPECT_NE(text.find("[in_situ_mb8_bf16]\n"), std::string::npos);
  const SystemSpec s = load_system_text(text, "per-mb");
  EXPECT_EQ(s.in_situ_micro_batch, 2);
  auto gemm = [&](Precision p, int64_t mb) { return s.in_situ_for(p, mb)[Op::Gemm]; };
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 1), 1.2);
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 2), 1.2);
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 3), 1.2);   // 3/2 < 8/3
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 4), 1.01);  // 4/2 = 8/4: the larger
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 16), 1.01);
  EXPECT_DOUBLE_EQ(gemm(Precision::Bf16, 2), 1.5);
  EXPECT_DOUBLE_EQ(gemm(Precision::Bf16, 8), 1.05);
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp16, 8), 1.01);  // no fp16 step at 8: its fp32 table
  EXPECT_DOUBLE_EQ(gemm(Precision::Fp32, 0), 1.2);   // no micro-batch: the base tables
  // The plan prices each layout with its micro-batch's factors.
  SystemSpec bare = s;
  bare.in_situ = SystemSpec::unit_factors();
  bare.in_situ_lowp.clear();
  bare.in_situ_at.clear();
  GPTConfig m;
  m.num_layers = 2, m.hidden_size = 64, m.num_heads = 4, m.seq_length = 32, m.vocab_size = 300;
  for (const auto& [mb, factor] : {std::pair<int64_t, double>{2, 1.2}, {8, 1.01}}) {
    PlanLayout L;
    L.par.micro_batch = L.par.global_batch = mb;
    L.engine = true;
    L.precision = Precision::Fp32;
    EXPECT_NEAR(evaluate_layout(m, s, L).stages[0].ops[Op::Gemm] /
                    evaluate_layout(m, bare, L).stages[0].ops[Op::Gemm],
                factor, 1e-9)
        << "micro-batch " << mb;
  }
  // Per-micro-batch tables without the base's micro-batch, or misnamed, are refused.
  std::string no_key = text;
  no_key.erase(no_key.find("in_situ_micro_batch = 2\n"), 24);
  EXPECT_THROW(load_system_text(no_key, "no key"), Error);
  std::string misnamed = text;
  misnamed.replace(misnamed.find("[in_situ_mb8_bf16]"), 18, "[in_situ_mb8_xyz8]");
  EXPECT_THROW(load_system_text(misnamed, "misnamed"), Error);
}

// In-situ factors per precision: [in_situ_bf16] (from a bf16 step) prices
// bf16 layouts; fp16, without its own, takes the fp32 step's [in_situ].
TEST(Calibrate, InSituFactorsPerPrecision) {
  Calibration c = synthetic_calibration();
  c.in_situ_batch = 2;
  c.in_situ[Op::Gemm] = 2.0;
  Profile bf16 = SystemSpec::unit_factors();
  bf16[Op::Gemm] = 3.0;
  bf16[Op::Cast] = 1.5;
  c.in_situ_lowp[Precision::Bf16] = bf16;
  auto path = temp_dir() / "in_situ.toml";
  std::ofstream(path) << calibration_toml(c);
  const SystemSpec s = load_system_file(path.string());
  EXPECT_DOUBLE_EQ(s.in_situ_for(Precision::Fp32)[Op::Gemm], 2.0);
  EXPECT_DOUBLE_EQ(s.in_situ_for(Precision::Bf16)[Op::Gemm], 3.0);
  EXPECT_DOUBLE_EQ(s.in_situ_for(Precision::Bf16)[Op::Cast], 1.5);
  EXPECT_DOUBLE_EQ(s.in_situ_for(Precision::Bf16)[Op::Loss], 1.0);
  EXPECT_DOUBLE_EQ(s.in_situ_for(Precision::Fp16)[Op::Gemm], 2.0);
  // The plan applies them: each precision's GEMM time over the same with
  // no factors.
  SystemSpec bare = s;
  bare.in_situ = SystemSpec::unit_factors();
  bare.in_situ_lowp.clear();
  GPTConfig m;
  m.num_layers = 2, m.hidden_size = 64, m.num_heads = 4, m.seq_length = 32, m.vocab_size = 300;
  for (const auto& [p, factor] : {std::pair{Precision::Fp32, 2.0}, {Precision::Bf16, 3.0},
                                  {Precision::Fp16, 2.0}}) {
    PlanLayout L;
    L.par.micro_batch = L.par.global_batch = 2;
    L.precision = p;
    L.engine = true;
    EXPECT_NEAR(evaluate_layout(m, s, L).stages[0].ops[Op::Gemm] /
                    evaluate_layout(m, bare, L).stages[0].ops[Op::Gemm],
                factor, 1e-9)
        << precision_name(p);
  }
  // A bad factor in a precision's table is named with its table.
  std::string text = calibration_toml(c);
  text.replace(text.find("[in_situ_bf16]\n"), 15, "[in_situ_bf16]\nnope = 2.0\n");
  EXPECT_THROW(
      {
        try {
          load_system_text(text, "bad");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("in_situ_bf16.nope"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

// The backend's fp32, bf16 and fp16 GEMMs timed in each role a linear calls
// them (forward, input gradient, weight gradient); other transposes are refused.
TEST(Calibrate, GemmTimingThroughTheBackendCoversTheThreeRoles) {
  GPTConfig m;
  m.num_layers = 1, m.hidden_size = 64, m.num_heads = 4, m.seq_length = 32, m.vocab_size = 300;
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16}) {
    for (const CalibShape& sh : training_gemm_shapes(m, 2, 1)) {
      const double flops = measure_gemm(kernels::cpu_backend(), p, sh, 0.0);
      EXPECT_GT(flops, 1e6) << precision_name(p) << " " << sh.ta << sh.tb << " " << sh.M << "x"
                            << sh.N << "x" << sh.K;
      EXPECT_LT(flops, 1e14);
    }
    CalibShape bad = training_gemm_shapes(m, 2, 1).front();
    bad.ta = 'T', bad.tb = 'T';
    EXPECT_THROW(measure_gemm(kernels::cpu_backend(), p, bad, 0.0), Error);
  }
}

// The real command, quick: it measures, writes, and `tessera plan` uses the file.
TEST(Calibrate, CommandWritesAFilePlanReads) {
  auto out = temp_dir() / "local.toml";
  std::filesystem::remove(out);
  const std::string model = std::string(TESSERA_SOURCE_DIR) + "/configs/models/tiny-local.toml";
  ASSERT_EQ(run("calibrate --quick --threads 1 --model " + model + " --output " + out.string()), 0);
  SystemSpec s = load_system_file(out.string());
  EXPECT_GT(s.peak_flops_32, 1e9);
  EXPECT_GT(s.memory_bandwidth, 1e8);
  EXPECT_FALSE(s.gemm_measured.empty());
  EXPECT_EQ(run("plan --system " + out.string() + " --model " + model +
                " --devices 1 --global-batch-size 8 --precision fp32"),
            0);
}

// A system name means this user's calibration when there is one (what
// `tessera calibrate` writes by default, under $XDG_CACHE_HOME), and the
// shipped file otherwise; calibrate's default output is that cache, never
// a tracked file of the checkout (issue 13).
TEST(Calibrate, NamesLookInTheUsersCacheFirst) {
  const auto cache = temp_dir() / "xdg";
  std::filesystem::remove_all(cache);
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  EXPECT_EQ(user_systems_dir(), (cache / "tessera" / "systems").string());
  const double shipped = load_system("local").peak_flops_32;

  Calibration c;
  c.cpu = "cached";
  c.threads = 1, c.ranks = 1, c.devices_per_node = 1;
  c.memory_bytes = 8e9, c.triad_bandwidth = 5e9, c.peak_gemm = 123e9;
  c.attention_efficiency = 0.2;
  c.gemm = {{64, 64, 64, 123e9}};
  std::filesystem::create_directories(user_systems_dir());
  std::ofstream(user_systems_dir() + "/local.toml") << calibration_toml(c);
  EXPECT_NEAR(load_system("local").peak_flops_32, 123e9, 1e6);
  EXPECT_NE(shipped, load_system("local").peak_flops_32);
  EXPECT_EQ(find_system_file("local"), user_systems_dir() + "/local.toml");
  EXPECT_NEAR(load_system("frontier").peak_flops_bf16, load_system_file(
      std::string(TESSERA_SOURCE_DIR) + "/configs/systems/frontier.toml").peak_flops_bf16, 1);

  // `calibrate --help` shows where it writes by default.
  const std::string help = (temp_dir() / "help.txt").string();
  ASSERT_EQ(std::system((std::string("XDG_CACHE_HOME=") + cache.string() + " " + TESSERA_BINARY +
                         " calibrate --help > " + help).c_str()),
            0);
  std::stringstream text;
  text << std::ifstream(help).rdbuf();
  EXPECT_NE(text.str().find(user_systems_dir() + "/local.toml"), std::string::npos) << text.str();

  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(cache);
}
