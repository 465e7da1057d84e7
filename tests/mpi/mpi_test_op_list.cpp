// The op list (model/op_list.h) under tensor parallelism is what the engine
// runs: tp 2, with and without sequence parallelism, every recompute mode,
// fp32 and bf16, dropout off and on. One micro-batch forward and backward
// of the whole model, recorded (tests/common/op_recorder.h), and the tp
// group's collective log: the trace, taken with a tp group that moves
// nothing, lists the same kernel calls in the same order with the same
// costs, and the same collectives in the same order with the same bytes.
// An MoE model too (experts under tp, a gated shared expert): its kernels
// are compared on tp rank 0, the list's rank (rank 1 adds no row-parallel
// expert bias and no router share of dL/d ln2), its collectives on both.
// The one-process cases are tests/model/test_op_list.cpp.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <vector>

#include "mpi_test_env.h"
#include "op_recorder.h"
#include "tessera/comm/collective_log.h"
#include "tessera/model/gpt.h"
#include "tiny_model.h"

namespace tessera {
namespace {

constexpr int64_t kB = 2;
constexpr int64_t kTp = 2;

struct Case {
  bool sp;
  Recompute recompute;
  Precision precision;
  bool dropout;
  bool llama = false;  // the Llama family (test::tiny_llama)
  bool moe = false;    // 4 experts, top-2, aux and z-loss, a gated shared expert
};

std::string name_of(const Case& c) {
  return fmt::format("{}{}tp 2{} {} {}{}", c.moe ? "moe " : "", c.llama ? "llama " : "",
                     c.sp ? " sp" : "",
                     recompute_name(c.recompute), precision_name(c.precision),
                     c.dropout ? " dropout" : "");
}

GPTConfig model_for(const Case& c) {
  GPTConfig m = c.llama ? test::tiny_llama(2) : test::tiny_gpt(2);
  // 128 rows over tp 2: every rank holds 64 real vocabulary columns, so
  // rank 0's list (the list's rank) is every rank's.
  m.vocab_size = 128;
  m.make_vocab_size_divisible_by = 8;
  if (c.dropout) m.attention_dropout = 0.1f, m.hidden_dropout = 0.1f;
  if (c.moe) {
    m.num_experts = 4;
    m.moe_router_topk = 2;
    m.moe_aux_loss_coeff = 0.01f;
    m.moe_z_loss_coeff = 0.001f;
    m.moe_shared_expert_intermediate_size = 32;
    m.moe_shared_expert_gate = true;
  }
  return m;
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (bool llama : {false, true})
    for (bool sp : {false, true})
      for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
        for (Precision p : {Precision::Fp32, Precision::Bf16})
          for (bool d : {false, true}) v.push_back({sp, r, p, d, llama});
  for (bool sp : {false, true})
    for (Recompute r : {Recompute::None, Recompute::Full})
      for (Precision p : {Precision::Fp32, Precision::Bf16}) v.push_back({sp, r, p, true, false, true});
  return v;
}

TEST(OpListTp, WhatRanIsTheList) {
  auto& w = test::world();
  // The mpi binaries run singleton and at 2 and 4 ranks (tests/CMakeLists.txt):
  // a case runs at the rank counts it names and is skipped, by design, at the others.
  if (w.size() < kTp || w.size() % kTp != 0) GTEST_SKIP() << "needs an even number of ranks";
  comm::Communicator& tp = test::grid_of(int(kTp)).tp();
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(name_of(c));
    const GPTConfig m = model_for(c);
    ParallelConfig par;
    par.tp = kTp;
    par.sequence_parallel = c.sp;
    test::RecordingCpu rec;
    GPT model(m, ParamLayout::build(m, par, tp.rank(), 0),
              {.tp = {&tp, c.sp},
               .precision = c.precision,
               .recompute = c.recompute,
               .backend = &rec.backend});
    model.init(5);
    model.refresh_working_copy();
    rec.take();  // the step's cast, not a micro-batch's work
    Activations acts;
    activations_init(acts, model.act_shape(kB, m.seq_length));
    acts.dropout = {.training = true, .seed = 7, .step = 1, .first_sample = 0};
    const int64_t N = kB * m.seq_length;
    std::vector<int32_t> in(static_cast<size_t>(N)), tgt(static_cast<size_t>(N));  // (B, T) each, the same on every rank
    for (int64_t i = 0; i < N; ++i) {
      in[size_t(i)] = int32_t((7 * i + 3) % m.vocab_size);
      tgt[size_t(i)] = int32_t((5 * i + 1) % m.vocab_size);
    }
    tp.barrier();
    comm::CollectiveLog& log = tp.log();
    const uint64_t before = log.recorded();
    model.forward(acts, in.data(), tgt.data());
    const uint64_t mid = log.recorded();
    const std::vector<test::Call> ran_fw = rec.take();
    acts.first_backward_of_step = true;
    model.backward(acts, in.data(), tgt.data(), 1.0f / float(N));
    const uint64_t after = log.recorded();
    ASSERT_LT(after - before, log.capacity()) << "the log's ring must hold the micro-batch";
    const std::vector<comm::CollectiveRecord> recs = log.last(size_t(after - before));
    const std::vector<comm::CollectiveRecord> fw_recs(recs.begin(),
                                                      recs.begin() + ptrdiff_t(mid - before));
    const std::vector<comm::CollectiveRecord> bw_recs(recs.begin() + ptrdiff_t(mid - before),
                                                      recs.end());

    OpListConfig oc;
    oc.model = m;
    oc.micro_batch = kB;
    oc.tp = kTp;
    oc.sequence_parallel = c.sp;
    oc.recompute = c.recompute;
    oc.precision = c.precision;
    const OpList ol = op_list(oc);
    const int64_t L = m.num_layers;

    // Kernels, call by call.
    const std::vector<test::Call> ran_bw = rec.take();
    const auto want_fw = test::whole_model<test::Call>(ol, L, true, test::append_calls);
    const auto want_bw = test::whole_model<test::Call>(ol, L, false, test::append_calls);
    if (!c.moe || tp.rank() == 0) {
      EXPECT_EQ(ran_fw, want_fw) << "ran:\n" << test::describe(ran_fw) << "traced:\n"
                                 << test::describe(want_fw);
      EXPECT_EQ(ran_bw, want_bw) << "ran:\n" << test::describe(ran_bw) << "traced:\n"
                                 << test::describe(want_bw);
    }

    // Collectives, in the order the engine issues them.
    const auto list_fw =
        test::whole_model<test::RanCollective>(ol, L, true, test::append_collectives);
    const auto list_bw =
        test::whole_model<test::RanCollective>(ol, L, false, test::append_collectives);
    EXPECT_EQ(test::collectives_of(fw_recs, "tp"), list_fw);
    EXPECT_EQ(test::collectives_of(bw_recs, "tp"), list_bw);
    EXPECT_FALSE(list_fw.empty());  // tp 2 communicates: the comparison is not of two empties
  }
}

}  // namespace
}  // namespace tessera
