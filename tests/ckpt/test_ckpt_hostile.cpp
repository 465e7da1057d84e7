// Checkpoints and safetensors files written by someone hostile: metadata
// with a recomputed metadata.crc32c (which anyone can do) that points out of
// bounds, wraps a size, or points at another tensor's bytes; wrong-typed
// fields; overlapping safetensors tensors. Each must be one tessera::Error,
// never a crash, a huge allocation or a silently wrong model. Also the
// leftovers of interrupted saves, prunes and exports.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ckpt_test_util.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/ckpt/safetensors.h"
#include "tessera/core/error.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ckpt;

struct Tiny {
  GPTConfig cfg = test::tiny_gpt();
  ParamLayout layout = ParamLayout::build(cfg, ParallelConfig{}, 0, 0);
  GPT model{cfg, layout};
  explicit Tiny(uint64_t seed) { test::fill_random(model.params().f32(), layout.numel(), seed); }
  std::string save(const std::string& dir, int64_t step, int keep = 0) {
    TrainState st{step, 0, 7, {}};
    return save_checkpoint(dir, whole_rank(model, nullptr), st, RunInfo{cfg, {}, "bytes"},
                           {keep, nullptr});
  }
};

json read_md(const std::string& step) { return json::parse(read_file(step + "/metadata.json")); }

// What an attacker (or a buggy tool) does: edit metadata.json and re-sign it.
void write_md_resigned(const std::string& step, const json& md) {
  const std::string text = md.dump(1);
  write_file_durable(step + "/metadata.json", text);
  write_file_durable(step + "/metadata.crc32c", crc32c_hex(crc32c(text.data(), text.size())) + "\n");
}

std::string load_error(const std::string& step) {
  try {
    Tiny t(9);
    load_into(open_checkpoint(step), t.model, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HostileCheckpoint, SliceStartNearInt64MaxIsRefused) {
  test::ScratchDir dir("hostile_slice");
  std::string step = Tiny(1).save(dir.str(), 1);
  json md = read_md(step);
  // start + shape wraps negative and used to pass "<= global".
  md["tensors"]["ln_f.weight"]["shards"]["params"][0]["slice"]["blocks"][0]["start"][0] =
      INT64_MAX;
  write_md_resigned(step, md);
  const std::string err = load_error(step);
  EXPECT_NE(err.find("outside the tensor"), std::string::npos) << err;
}

TEST(HostileCheckpoint, RowCountThatWrapsTheElementCountIsRefused) {
  test::ScratchDir dir("hostile_rows");
  std::string step = Tiny(1).save(dir.str(), 1);
  json md = read_md(step);
  // (2^59 + 16) x 32 = 2^64 + 512: wrapped, a 512-element buffer then overrun.
  md["tensors"]["wte"]["global_shape"] = {(int64_t(1) << 59) + 16, 32};
  write_md_resigned(step, md);
  const std::string err = load_error(step);
  EXPECT_NE(err.find("overflows"), std::string::npos) << err;
}

TEST(HostileCheckpoint, MetadataPointingAtAnotherTensorsBytesIsCaught) {
  test::ScratchDir dir("hostile_swap");
  std::string step = Tiny(1).save(dir.str(), 1);
  json md = read_md(step);
  // Same size, same file: every file CRC still matches.
  json& w = md["tensors"]["h.0.ln_1.weight"]["shards"]["params"][0];
  json& b = md["tensors"]["h.0.ln_1.bias"]["shards"]["params"][0];
  std::swap(w["byte_offset"], b["byte_offset"]);
  write_md_resigned(step, md);
  const std::string err = load_error(step);
  EXPECT_NE(err.find("points at the wrong bytes"), std::string::npos) << err;
}

TEST(HostileCheckpoint, VersionOneWithoutPieceChecksumsStillLoads) {
  test::ScratchDir dir("hostile_v1");
  Tiny a(1);
  std::string step = a.save(dir.str(), 1);
  json md = read_md(step);
  md["version"] = 1;
  for (auto& [name, t] : md["tensors"].items())
    for (auto& p : t["shards"]["params"]) p.erase("crc32c");
  write_md_resigned(step, md);
  Tiny b(2);
  load_into(open_checkpoint(step), b.model, nullptr);
  EXPECT_EQ(std::memcmp(a.model.params().data(), b.model.params().data(),
                        a.model.params().nbytes()),
            0);
  // ...but version 2 without them is refused: a piece checksum is not optional.
  md["version"] = 2;
  write_md_resigned(step, md);
  EXPECT_NE(load_error(step).find("no checksum"), std::string::npos) << load_error(step);
}

TEST(HostileCheckpoint, WrongTypedFieldsAreOneError) {
  test::ScratchDir dir("hostile_types");
  std::string step = Tiny(1).save(dir.str(), 1);
  const json good = read_md(step);
  for (const char* edit : {"byte_offset", "local_range", "seed", "version", "files"}) {
    json md = good;
    json& piece = md["tensors"]["wpe"]["shards"]["params"][0];
    if (std::string(edit) == "byte_offset") piece["byte_offset"] = "12";
    if (std::string(edit) == "local_range") piece["local_range"] = {0};
    if (std::string(edit) == "seed") md["seed"] = "12x";
    if (std::string(edit) == "version") md["version"] = "2";
    if (std::string(edit) == "files") md["files"] = json::array();
    write_md_resigned(step, md);
    EXPECT_NE(load_error(step), "") << edit;  // a tessera::Error, not a json exception
  }
}

// The tokenizer hash (issue 38): written as 16 hex digits and read back;
// absent (a checkpoint written before it was recorded) reads as 0, unknown,
// and still loads; anything else in its place is a corrupted file.
TEST(HostileCheckpoint, TokenizerHashIsReadBackAndOlderCheckpointsStillLoad) {
  test::ScratchDir dir("hostile_tokhash");
  Tiny a(1);
  TrainState st{1, 0, 7, {}};
  RunInfo run{a.cfg, {}, "bytes"};
  run.tokenizer_hash = 0x8aa01b7e740d41d2ull;
  const std::string step = save_checkpoint(dir.str(), whole_rank(a.model, nullptr), st, run);
  json md = read_md(step);
  EXPECT_EQ(md.value("tokenizer_hash", ""), "8aa01b7e740d41d2");
  EXPECT_EQ(open_checkpoint(step).run.tokenizer_hash, 0x8aa01b7e740d41d2ull);
  md.erase("tokenizer_hash");  // as every checkpoint before it was written
  write_md_resigned(step, md);
  EXPECT_EQ(open_checkpoint(step).run.tokenizer_hash, 0u);
  EXPECT_EQ(load_error(step), "");
  for (const json& bad : {json("8aa01b7e740d41d"), json("8AA01B7E740D41D2"), json("8aa01b7e740d41dg"),
                          json(uint64_t(0x8aa01b7e740d41d2ull)), json::array()}) {
    md["tokenizer_hash"] = bad;
    write_md_resigned(step, md);
    EXPECT_NE(load_error(step).find("corrupted tokenizer_hash"), std::string::npos)
        << bad.dump() << ": " << load_error(step);
  }
  // A run with no known tokenizer records none.
  const std::string plain = Tiny(2).save(dir.str() + "/plain", 1);
  EXPECT_FALSE(read_md(plain).contains("tokenizer_hash"));
}

void write_safetensors(const std::string& path, const json& header, size_t data_bytes) {
  std::string h = header.dump();
  std::ofstream f(path, std::ios::binary);
  uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << std::string(data_bytes, '\0');
}

TEST(HostileSafetensors, OverlappingTensorsAreRefused) {
  test::ScratchDir dir("hostile_st");
  const std::string path = dir / "model.safetensors";
  write_safetensors(path,
                    {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                     {"b", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}}},
                    24);
  std::string err;
  try {
    SafetensorsFile f(path);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("overlap"), std::string::npos) << err;
  // A shape whose element count wraps to the byte count is refused too.
  write_safetensors(path,
                    {{"a", {{"dtype", "F32"}, {"shape", {int64_t(1) << 62, 4}}, {"data_offsets", {0, 0}}}}},
                    0);
  EXPECT_THROW(SafetensorsFile{path}, Error);
}

TEST(Leftovers, FailedSavesPrunesAndLatestTemporariesAreRemovedAtTheNextSave) {
  test::ScratchDir dir("leftovers");
  Tiny a(1);
  a.save(dir.str(), 1);
  fs::create_directories(dir / ".step_000002.tmp-4242");
  fs::create_directories(dir / ".trash-step_000000-77/half");  // a prune killed mid-delete
  std::ofstream(dir / "latest.tmp-99") << "step_000002\n";
  a.save(dir.str(), 3);
  EXPECT_FALSE(fs::exists(dir / ".step_000002.tmp-4242"));
  EXPECT_FALSE(fs::exists(dir / ".trash-step_000000-77"));
  EXPECT_FALSE(fs::exists(dir / "latest.tmp-99"));
  // Pruning leaves no trash behind when it is not interrupted.
  a.save(dir.str(), 4, /*keep=*/1);
  for (const auto& de : fs::directory_iterator(dir.path))
    EXPECT_FALSE(de.path().filename().string().starts_with(".")) << de.path();
  EXPECT_FALSE(fs::exists(dir / "step_000001"));
  EXPECT_EQ(open_checkpoint(dir.str()).state.step, 4);
}

TEST(Leftovers, AnExportRemovesAKilledExportsTemporary) {
  test::ScratchDir dir("leftover_export");
  std::ofstream(dir / "model.safetensors.tmp") << "half an export";
  std::ofstream(dir / "config.json.tmp-123") << "{";
  Tiny a(1);
  // Make the export fail after the leftovers are seen: the real file's name
  // is taken by a directory, so the final rename cannot succeed.
  fs::create_directories(dir / "model.safetensors/x");
  EXPECT_THROW(export_hf_gpt2(a.model, dir.str()), Error);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.tmp"));  // nor its own temporary
  EXPECT_FALSE(fs::exists(dir / "config.json.tmp-123"));
}

}  // namespace
}  // namespace tessera
