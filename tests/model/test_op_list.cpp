// The op list (model/op_list.h) is what the engine runs: one process, one
// micro-batch through the whole model on the CPU backend, recording
// (tests/common/op_recorder.h), for each recompute mode, fp32 / bf16 / fp16,
// dropout off / on, GPT-2, the Llama family and MoE layers. The trace, taken on
// buffers nobody allocated, lists the same calls in the same order with the
// same shapes and costs. tests/mpi/mpi_test_op_list.cpp checks the
// collectives under tp 2.
#include <gtest/gtest.h>

#include "op_recorder.h"
#include "tiny_model.h"

#include <vector>

#include "tessera/core/rng.h"
#include "tessera/kernels/cpu/attention.h"
#include "tessera/model/flops.h"
#include "tessera/model/gpt.h"

namespace tessera {
namespace {

constexpr int64_t kB = 2;

struct Case {
  Recompute recompute;
  Precision precision;
  bool dropout;
  bool llama = false;  // the Llama family's block (test::tiny_llama)
  bool moe = false;    // 4 experts, top-2, aux and z-loss (model/moe_layer.h)
};

std::string name_of(const Case& c) {
  return std::string(c.llama ? "llama " : "") + (c.moe ? "moe " : "") +
         recompute_name(c.recompute) + " " +
         precision_name(c.precision) + (c.dropout ? " dropout" : " no-dropout");
}

GPTConfig model_for(const Case& c) {
  GPTConfig m = test::tiny_gpt(2);
  if (c.llama) m = test::tiny_llama(2);
  if (c.dropout) m.attention_dropout = 0.1f, m.hidden_dropout = 0.1f;
  if (c.moe) {
    m.num_experts = 4;
    m.moe_router_topk = 2;
    m.moe_aux_loss_coeff = 0.01f;
    m.moe_z_loss_coeff = 0.001f;
  }
  return m;
}

struct Ran {
  std::vector<test::Call> forward, backward;
};

// One micro-batch forward and backward of the whole model, recorded.
Ran run_engine(const Case& c) {
  const GPTConfig m = model_for(c);
  test::RecordingCpu rec;
  GPT model(m, ParamLayout::build(m, ParallelConfig{}, 0, 0),
            {.precision = c.precision, .recompute = c.recompute, .backend = &rec.backend});
  model.init(5);
  model.refresh_working_copy();
  rec.take();  // the step's cast, not a micro-batch's work
  Activations acts;
  activations_init(acts, model.act_shape(kB, m.seq_length));
  acts.dropout = {.training = true, .seed = 7, .step = 1, .first_sample = 0};
  const int64_t N = kB * m.seq_length;
  std::vector<int32_t> in(N), tgt(N);  // (B, T) each
  for (int64_t i = 0; i < N; ++i) {
    in[size_t(i)] = int32_t(rng_u64(3, 0, uint64_t(i)) % uint64_t(m.vocab_size));
    tgt[size_t(i)] = int32_t(rng_u64(3, 1, uint64_t(i)) % uint64_t(m.vocab_size));
  }
  Ran r;
  model.forward(acts, in.data(), tgt.data());
  r.forward = rec.take();
  acts.first_backward_of_step = true;
  model.backward(acts, in.data(), tgt.data(), 1.0f / float(N));
  r.backward = rec.take();
  return r;
}

OpList list_for(const Case& c) {
  OpListConfig oc;
  oc.model = model_for(c);
  oc.micro_batch = kB;
  oc.recompute = c.recompute;
  oc.precision = c.precision;
  return op_list(oc);
}

std::vector<test::Call> traced(const OpList& ol, int64_t layers, bool forward) {
  return test::whole_model<test::Call>(ol, layers, forward, test::append_calls);
}

class OpListMatchesTheEngine : public ::testing::TestWithParam<Case> {};

TEST_P(OpListMatchesTheEngine, CallByCall) {
  const Case c = GetParam();
  const Ran ran = run_engine(c);
  const OpList ol = list_for(c);
  const int64_t L = model_for(c).num_layers;
  const std::vector<test::Call> fw = traced(ol, L, true), bw = traced(ol, L, false);
  EXPECT_EQ(ran.forward, fw) << name_of(c) << "\nran forward:\n"
                             << test::describe(ran.forward) << "traced forward:\n"
                             << test::describe(fw);
  EXPECT_EQ(ran.backward, bw) << name_of(c) << "\nran backward:\n"
                              << test::describe(ran.backward) << "traced backward:\n"
                              << test::describe(bw);
  // Not vacuous: the tiny model runs 2 x 4 linears + the head forward; an
  // MoE layer's MLP is the router's GEMM and two grouped ones.
  int64_t gemms = 0, grouped = 0;
  for (const test::Call& k : ran.forward) {
    gemms += k.kernel == "matmul_forward";
    grouped += k.kernel == "grouped_matmul_forward";
  }
  EXPECT_EQ(gemms, 2 * (c.moe ? 3 : 4) + 1) << name_of(c);
  EXPECT_EQ(grouped, c.moe ? 2 * 2 : 0) << name_of(c);
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (bool llama : {false, true})
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
      for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
        for (bool d : {false, true}) v.push_back({r, p, d, llama});
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    for (Precision p : {Precision::Fp32, Precision::Bf16}) v.push_back({r, p, true, false, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Modes, OpListMatchesTheEngine, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           std::string s = name_of(info.param);
                           for (char& ch : s)
                             if (ch == ' ' || ch == '-') ch = '_';
                           return s;
                         });

// The comparison can fail: the trace without one of the engine's GEMMs or
// with a kernel's elements off no longer matches what ran.
TEST(OpList, AMissingGemmOrWrongSizeIsCaught) {
  const Case c{Recompute::Selective, Precision::Bf16, true};
  const Ran ran = run_engine(c);
  const int64_t layers = model_for(c).num_layers;
  OpList ol = list_for(c);
  ASSERT_EQ(ran.forward, traced(ol, layers, true));
  OpList missing = ol;
  for (size_t i = 0; i < missing.layer.size(); ++i)
    if (std::string(missing.layer[i].what) == "mlp.fc" &&
        missing.layer[i].phase == OpPhase::Forward) {
      missing.layer.erase(missing.layer.begin() + ptrdiff_t(i));
      break;
    }
  EXPECT_NE(ran.forward, traced(missing, layers, true));
  OpList off = ol;
  for (OpEntry& e : off.layer)
    if (std::string(e.kernel) == "dropout_rows" && e.phase == OpPhase::Backward) e.elements += 1;
  EXPECT_NE(ran.backward, traced(off, layers, false));
}

// The entries' own arithmetic: FLOPs of the GEMMs and of attention add up
// to flops.cpp's count of the model (the list lists all the work), and each
// dropout / cast is there exactly when the run has it.
TEST(OpList, FlopsAndOptionalKernels) {
  GPTConfig m = test::gpt2_small();
  OpListConfig oc;
  oc.model = m;
  oc.micro_batch = 1;
  const OpList ol = op_list(oc);
  double fw = 0;
  for (const OpEntry& e : ol.layer)
    if (e.phase == OpPhase::Forward) fw += e.flops;
  double head = 0;
  for (const OpEntry& e : ol.head)
    if (e.phase == OpPhase::Forward) head += e.flops;
  EXPECT_NEAR(fw / layer_forward_flops(m, m.seq_length), 1.0, 1e-12);
  EXPECT_NEAR(head / head_forward_flops(m, m.seq_length), 1.0, 1e-12);
  auto count = [](const OpList& l, const char* kernel) {
    int n = 0;
    for (const auto* part : {&l.embed, &l.layer, &l.head})
      for (const OpEntry& e : *part) n += std::string(e.kernel) == kernel;
    return n;
  };
  EXPECT_EQ(count(ol, "dropout_rows"), 0);
  EXPECT_EQ(count(ol, "cast"), 0);
  oc.model.hidden_dropout = 0.1f;
  oc.precision = Precision::Bf16;
  const OpList on = op_list(oc);
  // Embedding forward + backward; per layer 2 forward and 2 backward.
  EXPECT_EQ(count(on, "dropout_rows"), 2 + 4);
  // The fp32 output gradients of the two row-parallel linears.
  EXPECT_EQ(count(on, "cast"), 2);
  oc.training = false;
  EXPECT_EQ(count(op_list(oc), "dropout_rows"), 0);
  // The probability dropout's mask is drawn inside the flash kernel: its
  // draws ride on the attention entries (forward, selective recompute's
  // forward again, backward), one kernel tiling's worth per sequence and
  // local head; none without that dropout or outside training.
  auto draws = [](const OpList& l, OpPhase phase) {
    int64_t n = 0;
    for (const OpEntry& e : l.layer)
      if (e.cls == OpClass::Attention && e.phase == phase) n += e.mask_draws;
    return n;
  };
  oc.training = true;
  EXPECT_EQ(draws(op_list(oc), OpPhase::Forward), 0);
  oc.model.attention_dropout = 0.1f;
  oc.micro_batch = 3;
  oc.tp = 2;
  oc.recompute = Recompute::Selective;
  const OpList probs = op_list(oc);
  const int64_t per = 3 * (m.num_heads / 2);  // sequences x local heads
  EXPECT_EQ(draws(probs, OpPhase::Forward), per * cpu::attention_dropout_draws(m.seq_length, true));
  EXPECT_EQ(draws(probs, OpPhase::Recompute), draws(probs, OpPhase::Forward));
  EXPECT_EQ(draws(probs, OpPhase::Backward), per * cpu::attention_dropout_draws(m.seq_length, false));
  oc.training = false;
  EXPECT_EQ(draws(op_list(oc), OpPhase::Forward), 0);
}

// The family's entries by hand (no engine): the qkv GEMM's qkv_width
// columns, SwiGLU's 2 F-column fc and its N F elements, RMSNorm in place
// of LayerNorm, no bias passes, no position table, the untied head's GEMMs
// as the tied one's, attention's FLOPs as MHA's plus RoPE's rotation.
TEST(OpList, LlamaEntriesByHand) {
  const GPTConfig m = test::tiny_llama(2);  // C 32, 4 heads of 8, 2 groups, F 64
  ASSERT_EQ(m.ffn(), 64);
  OpListConfig oc;
  oc.model = m;
  oc.micro_batch = kB;
  const OpList ol = op_list(oc);
  const int64_t N = kB * m.seq_length, C = 32, F = 64, hd = 8;
  auto find = [](const std::vector<OpEntry>& l, OpPhase ph, const char* kernel, const char* what) {
    std::vector<const OpEntry*> out;
    for (const OpEntry& e : l)
      if (e.phase == ph && std::string(e.kernel) == kernel && std::string(e.what) == what)
        out.push_back(&e);
    return out;
  };
  // qkv: (4 + 2 x 2) heads x 8 = 64 columns (MHA's would be 96).
  const auto qkv = find(ol.layer, OpPhase::Forward, "matmul_forward", "attn.qkv");
  ASSERT_EQ(qkv.size(), 1u);
  EXPECT_EQ(qkv[0]->m, N);
  EXPECT_EQ(qkv[0]->n, 64);
  EXPECT_EQ(qkv[0]->k, C);
  const auto fc = find(ol.layer, OpPhase::Forward, "matmul_forward", "mlp.fc");
  ASSERT_EQ(fc.size(), 1u);
  EXPECT_EQ(fc[0]->n, 2 * F);  // [gate | up]
  const auto fc_dw = find(ol.layer, OpPhase::Backward, "matmul_backward.dweight", "mlp.fc");
  ASSERT_EQ(fc_dw.size(), 1u);
  EXPECT_EQ(fc_dw[0]->m, 2 * F);
  const auto sw = find(ol.layer, OpPhase::Forward, "swiglu_forward", "");
  ASSERT_EQ(sw.size(), 1u);
  EXPECT_EQ(sw[0]->elements, N * F);
  EXPECT_DOUBLE_EQ(sw[0]->bytes_read, 2.0 * double(N * F) * 4);  // gate and up, fp32
  EXPECT_DOUBLE_EQ(sw[0]->bytes_written, double(N * F) * 4);
  EXPECT_EQ(find(ol.layer, OpPhase::Backward, "swiglu_backward", "").size(), 1u);
  // RMSNorm: reads x and w, writes y and rstd.
  const auto ln1 = find(ol.layer, OpPhase::Forward, "rmsnorm_forward", "ln_1");
  ASSERT_EQ(ln1.size(), 1u);
  EXPECT_EQ(ln1[0]->elements, N * C);
  EXPECT_DOUBLE_EQ(ln1[0]->bytes_read, double(N * C + C) * 4);
  EXPECT_DOUBLE_EQ(ln1[0]->bytes_written, double(N * C + N) * 4);
  EXPECT_EQ(find(ol.head, OpPhase::Backward, "rmsnorm_backward", "ln_f").size(), 1u);
  // Nothing of GPT's that the family drops.
  for (const auto* part : {&ol.embed, &ol.layer, &ol.head})
    for (const OpEntry& e : *part) {
      const std::string k = e.kernel;
      EXPECT_TRUE(k.find("bias") == std::string::npos && k.find("layernorm") == std::string::npos &&
                  k.find("gelu") == std::string::npos && k.find("position") == std::string::npos)
          << k;
    }
  // The untied head: the same GEMMs as the tied one's.
  OpListConfig tied = oc;
  tied.model.untie_embeddings = false;
  const OpList t = op_list(tied);
  ASSERT_EQ(t.head.size(), ol.head.size());
  for (size_t i = 0; i < t.head.size(); ++i) {
    EXPECT_STREQ(t.head[i].kernel, ol.head[i].kernel);
    EXPECT_EQ(t.head[i].flops, ol.head[i].flops);
  }
  // FLOPs: the list's GEMMs and attention are flops.cpp's model count plus
  // RoPE's 3 FLOPs per rotated element of q (4 heads) and k (2 heads).
  double fw = 0, attn_bw = 0;
  for (const OpEntry& e : ol.layer) {
    if (e.phase == OpPhase::Forward) fw += e.flops;
    if (e.phase == OpPhase::Backward && e.cls == OpClass::Attention) attn_bw = e.flops;
  }
  const double rope = 3.0 * double(N) * double((4 + 2) * hd);
  EXPECT_NEAR(fw, kB * layer_forward_flops(m, m.seq_length) + rope, 1e-6);
  const double attn_fw = 4.0 * double(kB) * 16 * 16 * C;  // Q K^T and P V, 4 query heads of 8
  EXPECT_NEAR(attn_bw, 2.5 * attn_fw + 2 * rope, 1e-6);
  // GQA's groups must divide over tp, as the engine requires.
  oc.tp = 4;
  EXPECT_THROW(op_list(oc), Error);
}

}  // namespace
}  // namespace tessera
