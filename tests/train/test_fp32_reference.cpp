// The fp32 path is the reference: a fixed tiny run of the `tessera train`
// binary (embedded corpus, one thread, fixed seed) must give exactly the
// losses and gradient norms it gave when they were recorded
// (fp32_reference_losses.json, from commit b3a8b37, before the layering
// and mixed-precision work). Any change to the order of floating-point work
// in the fp32 path shows here as a bit difference.
//
// One thread: oneDNN's sgemm and the OpenMP kernels split work by thread
// count, so only a fixed count gives a fixed order of operations. The
// numbers belong to the CPU they were recorded on (an x86-64 with AVX-512);
// a machine whose oneDNN picks another sgemm kernel differs in the last bits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  const nlohmann::json ref = nlohmann::json::parse(ref_in);
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
