// The fp32 path is the reference: a fixed tiny run of the `tessera train`
// binary (embedded corpus, one thread, fixed seed) must give exactly the
// losses and gradient norms it gave when they were recorded
// (fp32_reference_losses.json, from commit b3a8b37, before the layering
// and mixed-precision work). Any change to the order of floating-point work
// in the fp32 path shows here as a bit difference.
//
// One thread: oneDNN's sgemm and the OpenMP kernels split work by thread
// count, so only a fixed count gives a fixed order of operations. The
// numbers belong to the kind of CPU they were recorded on: the top-level
// ones to an x86-64 with AVX-512, where b3a8b37 was recorded; `by_isa`
// holds b3a8b37's own numbers on other instruction sets (oneDNN's
// dispatch level, kernels/cpu/matmul_lowp_primitive.h), each recorded by
// building b3a8b37 on such a CPU and running the command below. On AVX2
// (an AMD EPYC, 2026-12-01) the losses equal the AVX-512 ones bit for bit
// and 5 of the 12 gradient norms differ in the last bits.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/kernels/cpu/matmul_lowp_primitive.h"

namespace {

namespace fs = std::filesystem;

TEST(Fp32Reference, TinyRunIsBitIdentical) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("tessera-fp32-ref-{}", getpid());
  fs::create_directories(dir);
  const fs::path metrics = dir / "m.jsonl";
  const std::string cmd = fmt::format(
      "'{}' train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
      "--micro-batch-size 4 --global-batch-size 8 --train-iters 12 --threads 1 --seed 1234 "
      "--attention-dropout 0 --hidden-dropout 0 "
      "--eval-interval 0 --lr 1e-3 --lr-warmup-iters 2 --log-interval 4 --no-progress "
      "--metrics-file '{}' > '{}' 2>&1",
      TESSERA_BINARY, metrics.string(), (dir / "log.txt").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << (dir / "log.txt");

  std::ifstream ref_in(std::string(TESSERA_SOURCE_DIR) + "/tests/train/fp32_reference_losses.json");
  const nlohmann::json all = nlohmann::json::parse(ref_in);
  const std::string isa = tessera::cpu::onednn_cpu_isa();
  const nlohmann::json& ref = all["by_isa"].contains(isa) ? all["by_isa"][isa] : all;
  std::printf("reference: %s (oneDNN isa %s)\n", &ref == &all ? "AVX-512" : isa.c_str(),
              isa.c_str());
  std::vector<double> loss, norm;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("loss")) continue;  // the run header
    loss.push_back(j["loss"].get<double>());
    norm.push_back(j["grad_norm"].get<double>());
  }
  ASSERT_EQ(loss.size(), ref["loss"].size());
  for (size_t i = 0; i < loss.size(); ++i) {
    // Stored as the float32 value widened to double: equality is bit equality.
    EXPECT_EQ(loss[i], ref["loss"][i].get<double>()) << "step " << i + 1;
    EXPECT_EQ(norm[i], ref["grad_norm"][i].get<double>()) << "step " << i + 1;
  }
  fs::remove_all(dir);
}

}  // namespace
