// Checkpoints: round trip, atomic commit, corruption and truncation caught
// by name, fallback to the previous good step, keep-last-K, and the slice
// metadata that lets other layouts read a checkpoint.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/comm/collective_log.h"
#include "tessera/comm/local_communicator.h"
#include "tessera/core/error.h"
#include "tessera/optim/adamw.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using test::ScratchDir;

struct TinyRun {
  GPTConfig cfg;
  ParamLayout layout;
  GPT model;
  AdamW optim;
  explicit TinyRun(uint64_t seed, const GPTConfig& c = test::tiny_gpt())
      : cfg(c),
        layout(ParamLayout::build(cfg, ParallelConfig{}, 0, 0)),
        model(cfg, layout),
        optim(layout, AdamWConfig{}) {
    test::fill_random(model.params().f32(), layout.numel(), seed);
    test::fill_random(optim.exp_avg().f32(), layout.numel(), seed + 1);
    test::fill_random(optim.exp_avg_sq().f32(), layout.numel(), seed + 2);
  }
  std::string save(const std::string& dir, int64_t step, int keep = 0) {
    TrainState st{step, step * 8, 0xFEEDFACECAFEBEEFull, {{"train_iters", 20}}};
    RunInfo info{cfg, ParallelConfig{}, "bytes"};
    return save_checkpoint(dir, whole_rank(model, &optim), st, info, {keep, nullptr});
  }
};

bool same_bits(const Buffer& a, const Buffer& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}


void flip_byte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(at));
  char c;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(std::streamoff(at));
  f.write(&c, 1);
}

TEST(Crc32c, KnownValueAndPortablePathAgree) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(rng_u64(1, 0, i));
  for (size_t n : {0, 1, 7, 8, 9, 63, 1000}) {
    EXPECT_EQ(crc32c(data.data(), n), crc32c_update_portable(0, data.data(), n)) << n;
    // Incremental equals one pass.
    EXPECT_EQ(crc32c_update(crc32c(data.data(), n / 3), data.data() + n / 3, n - n / 3),
              crc32c(data.data(), n));
  }
}

TEST(SliceMap, MatchesParamLayoutGlobalIndexUnderTensorAndExpertParallelism) {
  // GPT, and an MoE model whose experts' stacks split per expert under tp
  // ([gate | up] parts of each SwiGLU expert, biases, a gated shared expert).
  GPTConfig moe = test::tiny_gpt();
  moe.swiglu = true;
  moe.ffn_hidden_size = 64;
  moe.num_experts = 4;
  moe.moe_shared_expert_intermediate_size = 48;
  moe.moe_shared_expert_gate = true;
  // With expert parallelism (the MoE model at ep 2, dp 2): each ep rank's
  // experts sit at its expert_begin of the global stacks.
  for (const GPTConfig& m : {test::tiny_gpt(), moe})
  for (int64_t ep : {1, 2}) {
  if (ep > 1 && !m.moe()) continue;
  ParallelConfig par;
  par.tp = 2;
  par.dp = ep;
  par.ep = ep;
  for (int64_t r = 0; r < 2 * ep; ++r) {
    ParamLayout L = ParamLayout::build(m, par, r % 2, 0, r / 2);
    for (const ParamEntry& e : L.entries()) {
      SliceMap s = slice_of(L, e);
      ASSERT_EQ(s.numel(), e.numel()) << e.name;
      int64_t seen = 0;
      // Odd sub-ranges too: a ZeRO shard can start anywhere.
      const int64_t lo = e.numel() / 3, hi = e.numel() - 1;
      s.for_each_run(lo, hi, [&](int64_t l, int64_t g, int64_t n) {
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g + i, L.global_index(e, l + i)) << e.name;
        EXPECT_EQ(l, lo + seen);
        seen += n;
      });
      EXPECT_EQ(seen, hi - lo) << e.name;
    }
  }
  }
}

TEST(Checkpoint, RoundTripIsBitIdentical) {
  ScratchDir dir("ckpt_roundtrip");
  TinyRun a(11);
  std::string step_dir = a.save(dir.str(), 7);
  EXPECT_EQ(step_dir, dir / "step_000007");
  EXPECT_EQ(read_latest(dir.str()), "step_000007");

  Checkpoint ck = open_checkpoint(dir.str());
  EXPECT_EQ(ck.path, step_dir);
  EXPECT_EQ(ck.state.step, 7);
  EXPECT_EQ(ck.state.consumed_samples, 56);
  EXPECT_EQ(ck.state.seed, 0xFEEDFACECAFEBEEFull);
  EXPECT_EQ(ck.state.extra["train_iters"], 20);
  EXPECT_EQ(ck.run.tokenizer, "bytes");
  EXPECT_EQ(ck.run.model.summary(), a.cfg.summary());
  EXPECT_TRUE(ck.has_optimizer_state);
  EXPECT_TRUE(ck.notes.empty());

  TinyRun b(99);
  load_into(ck, b.model, &b.optim);
  EXPECT_TRUE(same_bits(a.model.params(), b.model.params()));
  EXPECT_TRUE(same_bits(a.optim.exp_avg(), b.optim.exp_avg()));
  EXPECT_TRUE(same_bits(a.optim.exp_avg_sq(), b.optim.exp_avg_sq()));

  // The metadata describes every tensor with its global shape.
  const auto& t = ck.metadata["tensors"]["h.1.attn.qkv.weight"];
  EXPECT_EQ(t["global_shape"], nlohmann::json({96, 32}));
  EXPECT_EQ(t["shards"]["params"].size(), 1u);
}

TEST(Checkpoint, RefusesADifferentModel) {
  ScratchDir dir("ckpt_model");
  TinyRun a(1);
  a.save(dir.str(), 1);
  GPTConfig other = test::tiny_gpt();
  other.num_layers = 3;
  ParamLayout L = ParamLayout::build(other, ParallelConfig{}, 0, 0);
  GPT m(other, L);
  EXPECT_TRUE(test::throws_error_with([&] { load_into(open_checkpoint(dir.str()), m, nullptr); },
                                      {"num_layers 2 vs 3"}));
}

TEST(Checkpoint, InterruptedSaveIsNeverLoadedAndIsCleanedUp) {
  ScratchDir dir("ckpt_atomic");
  TinyRun a(1);
  a.save(dir.str(), 1);
  // A crash mid-save of step 2: files written into staging, never committed.
  TinyRun b(2);
  std::string staging = begin_staging(dir.str(), 2, "4242");
  write_shard(staging, whole_rank(b.model, &b.optim));
  // ...and one whose data file was cut short before the manifest existed.
  fs::create_directories(dir / ".step_000003.tmp-77");
  std::ofstream(dir / ".step_000003.tmp-77/params-tp00-pp00-dp000.bin") << "torn";

  EXPECT_EQ(read_latest(dir.str()), "step_000001");
  Checkpoint ck = open_checkpoint(dir.str());
  EXPECT_EQ(ck.state.step, 1);
  TinyRun c(3);
  load_into(ck, c.model, &c.optim);
  EXPECT_TRUE(same_bits(a.model.params(), c.model.params()));

  // The next save removes the leftovers.
  TinyRun d(4);
  d.save(dir.str(), 4);
  EXPECT_FALSE(fs::exists(staging));
  EXPECT_FALSE(fs::exists(dir / ".step_000003.tmp-77"));
  EXPECT_EQ(open_checkpoint(dir.str()).state.step, 4);
}

TEST(Checkpoint, CommitRefusesWhenAShardIsMissing) {
  ScratchDir dir("ckpt_missing_shard");
  TinyRun a(1);
  std::string staging = begin_staging(dir.str(), 5, "1");
  write_shard(staging, whole_rank(a.model, &a.optim));
  EXPECT_TRUE(test::throws_error_with(
      [&] {
        commit_checkpoint(dir.str(), staging, 2, TrainState{5}, RunInfo{a.cfg, {}, ""}, 0);
      },
      {"1 of 2 ranks"}));
  EXPECT_TRUE(list_steps(dir.str()).empty());
}

TEST(Checkpoint, CorruptedByteIsRefusedNamingTheFile) {
  ScratchDir dir("ckpt_corrupt");
  TinyRun a(1), b(2);
  a.save(dir.str(), 1);
  std::string step2 = b.save(dir.str(), 2);
  const std::string file = step2 + "/exp_avg-tp00-pp00-dp000.bin";
  flip_byte(file, 1234);

  // Named step directory: an error naming the file.
  EXPECT_TRUE(test::throws_error_with([&] { open_checkpoint(step2); }, {file, "checksum"}));

  // The root: falls back to step 1 and says so.
  Checkpoint ck = open_checkpoint(dir.str());
  EXPECT_EQ(ck.state.step, 1);
  ASSERT_EQ(ck.notes.size(), 2u);
  EXPECT_NE(ck.notes[0].find(file), std::string::npos) << ck.notes[0];
  EXPECT_NE(ck.notes[1].find("previous good checkpoint " + dir / "step_000001"), std::string::npos)
      << ck.notes[1];
  TinyRun c(3);
  load_into(ck, c.model, &c.optim);
  EXPECT_TRUE(same_bits(a.optim.exp_avg(), c.optim.exp_avg()));
}

TEST(Checkpoint, TruncatedFileIsRefusedNamingTheFile) {
  ScratchDir dir("ckpt_truncated");
  TinyRun a(1), b(2);
  a.save(dir.str(), 1);
  std::string step2 = b.save(dir.str(), 2);
  const std::string file = step2 + "/params-tp00-pp00-dp000.bin";
  fs::resize_file(file, fs::file_size(file) - 100);
  EXPECT_TRUE(test::throws_error_with([&] { open_checkpoint(step2, /*verify=*/false); },
                                      {file, "truncated"}));
  EXPECT_EQ(open_checkpoint(dir.str()).state.step, 1);

  // A damaged metadata.json is named too: a digit changed (still valid
  // JSON: caught by metadata.crc32c), or a cut.
  std::string md = read_file(step2 + "/metadata.json");
  size_t at = md.find("\"byte_offset\": ") + 15;
  md[at] = md[at] == '9' ? '8' : char(md[at] + 1);
  std::ofstream(step2 + "/metadata.json") << md;
  EXPECT_TRUE(test::throws_error_with([&] { open_checkpoint(step2); },
                                      {step2 + "/metadata.json: checksum"}));
  std::ofstream(step2 + "/metadata.json") << md.substr(0, md.size() / 2);
  EXPECT_TRUE(test::throws_error_with([&] { open_checkpoint(step2); }, {step2 + "/metadata.json"}));
  // A missing file.
  fs::remove(dir / "step_000001/exp_avg_sq-tp00-pp00-dp000.bin");
  EXPECT_TRUE(test::throws_error_with([&] { open_checkpoint(dir.str()); },
                                      {"exp_avg_sq-tp00-pp00-dp000.bin: missing"}));
}

TEST(Checkpoint, KeepsTheNewestK) {
  ScratchDir dir("ckpt_keep");
  TinyRun a(1);
  for (int64_t s = 10; s <= 50; s += 10) a.save(dir.str(), s, /*keep=*/2);
  auto steps = list_steps(dir.str());
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].first, 50);
  EXPECT_EQ(steps[1].first, 40);
  EXPECT_EQ(read_latest(dir.str()), "step_000050");
  // Saving a step that exists again replaces it.
  a.save(dir.str(), 50, 2);
  EXPECT_EQ(list_steps(dir.str()).size(), 2u);
}

// The collective path of save_checkpoint (what an MPI job runs), on a
// world of one: the same files, and the synchronisation is logged.
TEST(Checkpoint, CollectiveSaveOverACommunicator) {
  ScratchDir dir("ckpt_comm");
  TinyRun a(1);
  comm::LocalCommunicator world;
  const uint64_t before = world.log().recorded();
  save_checkpoint(dir.str(), whole_rank(a.model, &a.optim), TrainState{9}, RunInfo{a.cfg, {}, ""},
                  {0, &world});
  EXPECT_EQ(world.log().recorded() - before, 4u);  // tag broadcast + 3 barriers
  TinyRun b(2);
  load_into(open_checkpoint(dir.str()), b.model, &b.optim);
  EXPECT_TRUE(same_bits(a.model.params(), b.model.params()));
}

// One tp rank's slices (layout L) of the reference buffers of `one`.
struct TpSlices {
  std::vector<float> p, m, v;
};

TpSlices tp_slices(TinyRun& one, const ParamLayout& L) {
  TpSlices x;
  x.p.resize(size_t(L.numel()));
  x.m.resize(x.p.size());
  x.v.resize(x.p.size());
  for (const ParamEntry& e : L.entries()) {
    const ParamEntry& g = one.layout.find(e.name);
    for (int64_t i = 0; i < e.numel(); ++i) {
      int64_t gi = L.global_index(e, i);
      // Vocabulary rows past the tp=1 padding do not exist there: zero.
      bool in = gi < g.numel();
      x.p[size_t(e.offset + i)] = in ? one.model.params().f32()[g.offset + gi] : 0.0f;
      x.m[size_t(e.offset + i)] = in ? one.optim.exp_avg().f32()[g.offset + gi] : 0.0f;
      x.v[size_t(e.offset + i)] = in ? one.optim.exp_avg_sq().f32()[g.offset + gi] : 0.0f;
    }
  }
  return x;
}

// ZeRO-1: dp rank `dp` of 2 saves its half of the optimizer state (padded);
// dp rank 0 also saves the parameters (replicated over dp: one copy is enough).
void write_zero1_shard(const std::string& staging, const ParamLayout& L, int64_t tp, int64_t dp,
                       const TpSlices& x) {
  const int64_t per = (L.numel() + 1) / 2, b = dp * per, e = b + per;
  ShardView s;
  s.layout = &L;
  s.tp_rank = tp;
  s.dp_rank = dp;
  if (dp == 0) s.params.push_back({0, L.numel(), x.p.data()});
  std::vector<float> mp(size_t(per), 0.0f), vp(size_t(per), 0.0f);
  for (int64_t i = b; i < std::min(e, L.numel()); ++i) {
    mp[size_t(i - b)] = x.m[size_t(i)];
    vp[size_t(i - b)] = x.v[size_t(i)];
  }
  s.exp_avg.push_back({b, std::min(e, L.numel()), mp.data()});
  s.exp_avg_sq.push_back({b, std::min(e, L.numel()), vp.data()});
  write_shard(staging, s);
}

// One process's checkpoint read by tp rank 1 of a tp=2 layout, with a ZeRO
// range that starts mid-tensor and runs into padding.
void expect_tp_rank_reads_one_process_checkpoint(TinyRun& one) {
  ScratchDir dir1("ckpt_sharded_one");
  one.save(dir1.str(), 1);
  ParallelConfig par2;
  par2.tp = 2;
  ParamLayout L1 = ParamLayout::build(one.cfg, par2, 1, 0);
  std::vector<float> p(size_t(L1.numel()));
  Checkpoint ck1 = open_checkpoint(dir1.str());
  load_params(ck1, L1, 0, L1.numel(), p.data());
  const int64_t b = L1.numel() / 3, e = L1.numel() + 5;
  std::vector<float> m(size_t(e - b)), v(size_t(e - b));
  load_optimizer(ck1, L1, b, e, m.data(), v.data());
  for (const ParamEntry& en : L1.entries()) {
    const ParamEntry& g = one.layout.find(en.name);
    for (int64_t i = 0; i < en.numel(); ++i) {
      int64_t gi = L1.global_index(en, i);
      float want = gi < g.numel() ? one.model.params().f32()[g.offset + gi] : 0.0f;
      ASSERT_EQ(p[size_t(en.offset + i)], want) << en.name << " " << i;
      int64_t k = en.offset + i;
      if (k >= b)
        ASSERT_EQ(m[size_t(k - b)], gi < g.numel() ? one.optim.exp_avg().f32()[g.offset + gi] : 0.0f);
    }
  }
  for (int64_t k = L1.numel(); k < e; ++k) EXPECT_EQ(v[size_t(k - b)], 0.0f);  // padding
}

// Shards written by a tp=2 x ZeRO(dp=2) job, read by one process: the same
// values by global index. This is the multi-rank format with more shards.
// The Llama family too (issue 17): qkv's unequal q, k, v parts (GQA),
// SwiGLU's gate and up parts, the untied lm_head.
class ShardedCheckpoint : public ::testing::TestWithParam<bool> {};

TEST_P(ShardedCheckpoint, WriteReadsBackUnderAnotherLayout) {
  const bool llama = GetParam();
  ScratchDir dir(llama ? "ckpt_sharded_llama" : "ckpt_sharded");
  TinyRun one(5, llama ? test::tiny_llama() : test::tiny_gpt());  // the reference values
  ParallelConfig par;
  par.tp = 2;
  par.dp = 2;
  par.zero_stage = 1;
  std::string staging = begin_staging(dir.str(), 3, "9");
  for (int64_t tp = 0; tp < 2; ++tp) {
    ParamLayout L = ParamLayout::build(one.cfg, par, tp, 0);
    const TpSlices x = tp_slices(one, L);
    for (int64_t dp = 0; dp < 2; ++dp) write_zero1_shard(staging, L, tp, dp, x);
  }
  commit_checkpoint(dir.str(), staging, 4, TrainState{3}, RunInfo{one.cfg, par, ""}, 0);

  Checkpoint ck = open_checkpoint(dir.str());
  EXPECT_EQ(ck.run.par.tp, 2);
  EXPECT_EQ(ck.metadata["files"].size(), 2u + 4u * 2u);
  const auto& qkv = ck.metadata["tensors"]["h.0.attn.qkv.weight"]["shards"]["params"];
  ASSERT_EQ(qkv.size(), 2u);
  EXPECT_EQ(qkv[1]["slice"]["blocks"].size(), 3u);  // q, k and v parts of tp rank 1
  if (llama) {
    // tiny_llama: hs 8, 4 q heads and 2 kv heads; tp rank 1 holds q rows
    // 16-31, k rows 40-47 and v rows 56-63 (of 64).
    const auto& b = qkv[1]["slice"]["blocks"];
    EXPECT_EQ(b[0]["start"], nlohmann::json({16, 0}));
    EXPECT_EQ(b[0]["shape"], nlohmann::json({16, 32}));
    EXPECT_EQ(b[1]["start"], nlohmann::json({40, 0}));
    EXPECT_EQ(b[1]["shape"], nlohmann::json({8, 32}));
    EXPECT_EQ(b[2]["start"], nlohmann::json({56, 0}));
    const auto& fc = ck.metadata["tensors"]["h.0.mlp.fc.weight"]["shards"]["params"];
    EXPECT_EQ(fc[1]["slice"]["blocks"].size(), 2u);  // gate and up
    EXPECT_TRUE(ck.metadata["tensors"].contains("lm_head.weight"));
    EXPECT_EQ(ck.run.model.summary(), one.cfg.summary());
  }

  TinyRun back(77, one.cfg);
  load_into(ck, back.model, &back.optim);
  EXPECT_TRUE(same_bits(one.model.params(), back.model.params()));
  EXPECT_TRUE(same_bits(one.optim.exp_avg(), back.optim.exp_avg()));
  EXPECT_TRUE(same_bits(one.optim.exp_avg_sq(), back.optim.exp_avg_sq()));

  expect_tp_rank_reads_one_process_checkpoint(one);
}

INSTANTIATE_TEST_SUITE_P(Family, ShardedCheckpoint, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Llama" : "Gpt"; });

}  // namespace
}  // namespace tessera
