// Agreement with PyTorch in bf16: the engine's --bf16 forward and backward
// of a small GPT (one global batch, dropout off) against the same model
// in PyTorch under torch.autocast("cpu", dtype=torch.bfloat16), both from
// identical fp32 weights. torch_reference_bf16.py does the comparison and
// explains the tolerances: the loss within 1e-2 relative, and each
// gradient as close to PyTorch's autocast gradient as the two bf16
// computations' own errors (each measured against float64) allow.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tessera/core/rng.h"
#include "tessera/train/trainer.h"
#include "fixed_batches.h"
#include "tiny_model.h"
#include "torch_dump.h"
#include "torch_manifest.h"

namespace tessera {
namespace {

TEST(TorchReferenceBf16, LossAndGradientsAgreeWithAutocast) {
  TrainConfig cfg;
  cfg.model = test::tiny_gpt();
  cfg.model.hidden_size = 64;  // K of 64-256 per GEMM: bf16 rounding that shows
  cfg.par.micro_batch = 4;
  cfg.par.global_batch = 4;
  cfg.train_iters = 1;
  cfg.bf16 = true;
  cfg.seed = 11;
  cfg.peak_tflops = 1;
  cfg.validate(1);

  const int64_t B = cfg.par.micro_batch, T = cfg.model.seq_length, V = cfg.model.vocab_size;
  std::vector<int32_t> tokens(size_t(B * (T + 1)));  // (B, T + 1)
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(rng_u64(5, 0, i) % uint64_t(V));
  test::FixedBatches data(tokens, B, V);
  Trainer trainer(cfg, data);
  GPT& model = trainer.model();
  ASSERT_EQ(model.precision(), Precision::Bf16);
  model.refresh_working_copy();

  const test::TorchDump dir("torch_bf16");
  test::write_floats(dir / "params.f32", model.params().f32(), model.params().numel());

  Activations acts;
  activations_init(acts, model.act_shape(B, T));
  std::vector<int32_t> in(size_t(B * T)), tgt(size_t(B * T));  // (B, T) each
  test::split_window(tokens.data(), B, T, in.data(), tgt.data());
  model.grads().zero();
  const double loss = model.forward(acts, in.data(), tgt.data());
  model.backward(acts, in.data(), tgt.data(), 1.0f / float(B * T));
  test::write_floats(dir / "grads.f32", model.grads().f32(), model.grads().numel());

  nlohmann::json m = test::torch_manifest(cfg, model, tokens);
  m["loss"] = loss;
  std::ofstream(dir / "manifest.json") << m.dump();

  dir.check_with("torch_reference_bf16.py");
}

}  // namespace
}  // namespace tessera
