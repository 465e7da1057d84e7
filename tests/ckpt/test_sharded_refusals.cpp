// Sharded checkpoints that must not import (issue 35, item 6): each way an
// index and its shards can disagree is one error naming the file and the
// tensor, raised from the headers before any tensor is read, and through
// the CLI one line and exit 2. Also --max-shard-size's sizes and the
// shard-cutting rule, against huggingface_hub's own examples.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "export_case.h"
#include "shard_case.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/hf_shards.h"
#include "tessera/ckpt/hf_tensors.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using nlohmann::json;
using test::Exported;
using test::ScratchDir;
using test::throws_error_with;

// A GPT-2 export cut into three shards, for each test to break one way.
struct Broken {
  ScratchDir dir;
  test::Resharded r;
  std::vector<std::string> names;  // the shards' file names
  explicit Broken(const std::string& name) : dir(name) {
    Exported x;
    export_hf(x.model, dir / "hf");
    r = test::reshard(dir / "hf/model.safetensors", 3);
    names = r.names();
  }
  std::string index() const { return dir / "bad/model.safetensors.index.json"; }
  std::string shard(size_t i) const { return dir / ("bad/" + names[i]); }
  // A tensor the (unbroken) map places in shard i.
  std::string tensor_in(size_t i) const { return r.shards[i].begin()->first; }
  void write(const std::string& index_text = "") const {
    test::write_resharded(r, dir / "bad", dir / "hf", index_text);
  }
  // The error opening the broken directory gives ("" if none).
  std::string error() const {
    return test::error_message([&] { HfTensors t(dir / "bad"); });
  }
};

TEST(ShardedRefusals, IndexThatIsNotJsonOrHasNoWeightMap) {
  Broken b("shard_bad_json");
  b.write(R"({"weight_map": {"a": )");
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), "not a valid index (bad JSON"}));
  b.write(R"({"metadata": {"total_size": 4}})");
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), "no \"weight_map\" object"}));
  b.write(R"({"weight_map": {"transformer.wte.weight": 3}})");
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), "weight_map[\"transformer.wte.weight\"] is 3"}));
  b.write(R"({"weight_map": {}})");
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); }, {b.index(), "weight_map is empty"}));
}

TEST(ShardedRefusals, AShardTheMapNamesIsMissingOrNotSafetensors) {
  Broken b("shard_missing");
  b.write();
  EXPECT_EQ(b.error(), "");  // unbroken, it opens
  fs::remove(b.shard(1));
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), b.names[1], "does not exist", b.tensor_in(1)}));
  std::ofstream(b.shard(1)) << "abc";
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.shard(1), "not a safetensors file"}));
}

TEST(ShardedRefusals, ATensorTheMapPlacesInAShardIsNotThere) {
  Broken b("shard_lacks");
  const std::string gone = b.tensor_in(2);
  b.r.shards[2].erase(gone);  // the map still places it in shard 3
  b.r.index["metadata"].erase("total_size");
  b.write();
  const std::string e = b.error();
  EXPECT_NE(e.find(b.shard(2) + ": no tensor " + gone + ", which " + b.index()), std::string::npos)
      << e;
  // The map placing a tensor in one shard while another holds it.
  Broken c("shard_elsewhere");
  const std::string moved = c.tensor_in(0);
  c.r.index["weight_map"][moved] = c.names[1];
  c.write();
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(c.dir / "bad"); },
                                {c.index(), "places " + moved + " in " + c.names[1],
                                 "but it is in " + c.shard(0)}));
}

TEST(ShardedRefusals, ATensorInAShardButNotInTheMapIsRefused) {
  Broken b("shard_unmapped");
  const std::string hidden = b.tensor_in(1);
  b.r.index["weight_map"].erase(hidden);
  b.write();
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.shard(1), "tensor " + hidden + " is not in " + b.index()}));
}

TEST(ShardedRefusals, ATensorInTwoShardsOrNamedTwiceInTheMapIsRefused) {
  Broken b("shard_twice");
  const std::string name = b.tensor_in(0);
  b.r.shards[2][name] = b.r.shards[0][name];
  b.write();
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), "tensor " + name + " is in more than one shard",
                                 b.shard(0), b.shard(2)}));
  // JSON keeps the last of two equal keys; the index is refused instead.
  Broken c("shard_key_twice");
  std::string text = c.r.index.dump();
  const std::string entry = fmt::format("\"{}\":\"{}\"", c.tensor_in(0), c.names[0]);
  ASSERT_NE(text.find(entry), std::string::npos);
  text.replace(text.find(entry), entry.size(),
               entry + fmt::format(",\"{}\":\"{}\"", c.tensor_in(0), c.names[1]));
  c.write(text);
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(c.dir / "bad"); },
                                {c.index(), "weight_map names tensor " + c.tensor_in(0) + " twice"}));
}

TEST(ShardedRefusals, TotalSizeMustBeTheTensorsDataBytes) {
  Broken b("shard_total");
  const uint64_t bytes = b.r.index["metadata"]["total_size"];
  b.r.index["metadata"]["total_size"] = bytes + 4;
  b.write();
  EXPECT_TRUE(throws_error_with(
      [&] { HfTensors t(b.dir / "bad"); },
      {b.index(), fmt::format("metadata.total_size is {} but the shards' tensors hold {} bytes",
                              bytes + 4, bytes)}));
  b.r.index["metadata"]["total_size"] = "big";
  b.write();
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.index(), "metadata.total_size is \"big\", not a byte count"}));
  // Absent (it is optional to transformers) or right, the index opens.
  b.r.index["metadata"].erase("total_size");
  b.write();
  EXPECT_EQ(b.error(), "");
  b.r.index["metadata"]["total_size"] = bytes;
  b.write();
  EXPECT_EQ(b.error(), "");
}

TEST(ShardedRefusals, AShardOutsideTheDirectoryIsRefusedEvenIfItExists) {
  Broken b("shard_escape");
  const std::string t = b.tensor_in(0);
  const std::vector<std::string> outside = {"../hf/model.safetensors", b.dir / "hf/model.safetensors",
                                            "sub/../../hf/model.safetensors"};
  for (const std::string& shard : outside) {
    b.r.index["weight_map"][t] = shard;
    b.write();
    ASSERT_TRUE(fs::exists(b.dir / "hf/model.safetensors"));
    EXPECT_TRUE(throws_error_with([&] { HfTensors h(b.dir / "bad"); },
                                  {b.index(), t, "'" + shard + "'", "not a file name inside"}));
  }
}

// Headers are read before any tensor, so a corrupt header length must not
// become a huge allocation: over safetensors' own 100 MB limit it is refused
// (a sparse 200 MB file: no disk or time spent).
TEST(ShardedRefusals, AShardHeaderOverTheLimitIsRefused) {
  Broken b("shard_header_limit");
  b.write();
  {
    std::ofstream f(b.shard(0), std::ios::binary | std::ios::trunc);
    const uint64_t len = 150000000;
    f.write(reinterpret_cast<const char*>(&len), 8);
  }
  fs::resize_file(b.shard(0), 200000000);
  EXPECT_TRUE(throws_error_with([&] { HfTensors t(b.dir / "bad"); },
                                {b.shard(0), "header length 150000000 is over safetensors' 100 MB limit"}));
}

TEST(ShardedRefusals, ADirectoryWithNeitherFileAndTheCliSayOneLine) {
  ScratchDir dir("shard_cli_refusals");
  fs::create_directories(dir / "empty");
  EXPECT_TRUE(throws_error_with([&] { resolve_hf_weights(dir / "empty", "--input"); },
                                {"--input " + (dir / "empty"), "neither model.safetensors nor "
                                                               "model.safetensors.index.json"}));
  Broken b("shard_cli");
  b.r.index["metadata"]["total_size"] = 12;
  b.write();
  int rc;
  const std::string out = test::run_tessera(
      fmt::format("import --input {} --output {}", b.dir / "bad", b.dir / "imported"), &rc);
  EXPECT_EQ(WEXITSTATUS(rc), 2) << out;
  EXPECT_EQ(out.rfind("tessera: error: " + b.index() + ": metadata.total_size is 12", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_FALSE(fs::exists(b.dir / "imported/latest"));
}

TEST(ShardSize, SizesAsTransformersMaxShardSizeReadsThem) {
  EXPECT_EQ(parse_shard_size("5GB", "--max-shard-size"), 5000000000u);
  EXPECT_EQ(parse_shard_size("500MB", "--max-shard-size"), 500000000u);
  EXPECT_EQ(parse_shard_size("10KB", "--max-shard-size"), 10000u);
  EXPECT_EQ(parse_shard_size("2GiB", "--max-shard-size"), 2147483648u);
  EXPECT_EQ(parse_shard_size("3mib", "--max-shard-size"), 3145728u);
  EXPECT_EQ(parse_shard_size("4096", "--max-shard-size"), 4096u);
  for (const char* bad : {"", "GB", "5TB", "1.5GB", "-1GB", "5 GB", "99999999999999GB"})
    EXPECT_TRUE(throws_error_with([&] { parse_shard_size(bad, "--max-shard-size"); },
                                  {"--max-shard-size '" + std::string(bad) + "': not a size"}))
        << bad;
  EXPECT_TRUE(throws_error_with([&] { parse_shard_size("5Gb", "--max-shard-size"); },
                                {"--max-shard-size '5Gb': a lowercase b means bits", "write 5GB"}));
  EXPECT_TRUE(throws_error_with([&] { parse_shard_size("0MB", "--max-shard-size"); },
                                {"more than 0 bytes"}));
}

// huggingface_hub's test of split_state_dict_into_shards_factory: sizes
// 6, 10, 30, 2, 2 under a limit of 10 give [1], [3], [2], [4, 5] (the
// oversized tensor is closed into its own shard before the open one).
TEST(ShardSize, ShardsAreCutByHuggingFacesRule) {
  std::vector<float> data(30, 1.0f);
  SafetensorsWriter w;
  const int64_t sizes[] = {6, 10, 30, 2, 2};
  for (int i = 0; i < 5; ++i) w.add(fmt::format("layer_{}", i + 1), {sizes[i]}, data.data());
  EXPECT_EQ(w.tensor_bytes(), 4u * 50);
  const std::vector<SafetensorsWriter> s = w.split(4 * 10);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].names(), std::vector<std::string>{"layer_1"});
  EXPECT_EQ(s[1].names(), std::vector<std::string>{"layer_3"});
  EXPECT_EQ(s[2].names(), std::vector<std::string>{"layer_2"});
  EXPECT_EQ(s[3].names(), (std::vector<std::string>{"layer_4", "layer_5"}));
  // The docstring's: 6, 6, 2, 6, 2, 2 under 10 -> [6], [6+2], [6+2+2].
  SafetensorsWriter v;
  const int64_t doc[] = {6, 6, 2, 6, 2, 2};
  for (int i = 0; i < 6; ++i) v.add(fmt::format("t{}", i), {doc[i]}, data.data());
  const std::vector<SafetensorsWriter> d = v.split(4 * 10);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].tensor_bytes(), 4u * 6);
  EXPECT_EQ(d[1].tensor_bytes(), 4u * 8);
  EXPECT_EQ(d[2].tensor_bytes(), 4u * 10);
  EXPECT_EQ(shard_names(3)[2], "model-00003-of-00003.safetensors");
}

}  // namespace
}  // namespace tessera
