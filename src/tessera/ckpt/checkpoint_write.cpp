// Writing a checkpoint: each rank's files, rank 0's commit, pruning.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/config/config_json.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/comm/communicator.h"
#include "tessera/core/error.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// metadata.json's "tokenizer": where it came from, as an absolute path (a
// relative one means nothing once the checkpoint is read from elsewhere).
std::string recorded_tokenizer(const RunInfo& run) {
  if (run.tokenizer.empty() || run.tokenizer == "bytes") return run.tokenizer;
  return fs::absolute(run.tokenizer).lexically_normal().string();
}

}  // namespace

std::string step_dir_name(int64_t step) { return fmt::format("step_{:06}", step); }

ShardView whole_rank(GPT& model, AdamW* optim, int64_t tp_rank, int64_t pp_rank, int64_t dp_rank) {
  ShardView v;
  v.layout = &model.layout();
  v.tp_rank = tp_rank;
  v.pp_rank = pp_rank;
  v.dp_rank = dp_rank;
  v.params.push_back({0, model.layout().numel(), model.params().f32()});
  if (optim)
    for (const FlatSegment& s : optim->segments()) {
      v.exp_avg.push_back({s.global_begin, s.global_end, optim->exp_avg().f32() + s.shard_offset});
      v.exp_avg_sq.push_back(
          {s.global_begin, s.global_end, optim->exp_avg_sq().f32() + s.shard_offset});
    }
  return v;
}

std::string begin_staging(const std::string& dir, int64_t step, const std::string& tag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  TESSERA_CHECK(!ec, "cannot create checkpoint directory {}: {}", dir, ec.message());
  remove_stale_staging(dir);
  fs::path staging = fs::path(dir) / fmt::format(".{}.tmp-{}", step_dir_name(step), tag);
  fs::create_directory(staging, ec);
  TESSERA_CHECK(!ec, "cannot create {}: {}", staging.string(), ec.message());
  return staging.string();
}

void write_shard(const std::string& staging, const ShardView& v) {
  TESSERA_CHECK(v.layout, "write_shard: no layout");
  const ParamLayout& L = *v.layout;
  json files = json::object(), tensors = json::object();
  json shard = {{"tp", v.tp_rank}, {"pp", v.pp_rank}, {"dp", v.dp_rank}};

  // One file per kind: the ranges' parameter elements in layout order,
  // range after range (unit padding, which holds no parameter, is skipped).
  auto write_kind = [&](const char* kind, const std::vector<DataRange>& ranges) {
    if (ranges.empty()) return json();
    const std::string name = shard_file_name(kind, v.tp_rank, v.pp_rank, v.dp_rank);
    DurableWriter w((fs::path(staging) / name).string());
    json covered = json::array();
    for (const DataRange& r : ranges) {
      covered.push_back({r.begin, r.end});
      for (const ParamEntry& e : L.entries()) {
        const int64_t a = std::max(r.begin, e.offset), z = std::min(r.end, e.offset + e.numel());
        if (a >= z) continue;
        json& t = tensors[e.name];
        if (t.is_null())
          t = {{"global_shape", shape_to_json(e.global_shape)}, {"shards", json::object()}};
        const float* piece = r.data + (a - r.begin);
        const size_t piece_bytes = size_t(z - a) * sizeof(float);
        t["shards"][kind].push_back({{"file", name},
                                     {"byte_offset", int64_t(w.bytes())},
                                     {"local_range", {a - e.offset, z - e.offset}},
                                     {"crc32c", crc32c_hex(crc32c(piece, piece_bytes))},
                                     {"slice", slice_to_json(slice_of(L, e))},
                                     {"tp", v.tp_rank},
                                     {"pp", v.pp_rank},
                                     {"dp", v.dp_rank}});
        w.write(piece, piece_bytes);
      }
    }
    w.close();
    files[name] = {{"bytes", w.bytes()}, {"crc32c", crc32c_hex(w.crc())}};
    return covered;
  };
  if (json c = write_kind("params", v.params); !c.is_null()) shard["params_ranges"] = c;
  TESSERA_CHECK(v.exp_avg.size() == v.exp_avg_sq.size(),
                "write_shard: exp_avg and exp_avg_sq go together");
  if (json c = write_kind("exp_avg", v.exp_avg); !c.is_null()) shard["optim_ranges"] = c;
  write_kind("exp_avg_sq", v.exp_avg_sq);

  json manifest = {{"files", files}, {"shard", shard}, {"tensors", tensors}};
  write_file_durable((fs::path(staging) / shard_manifest_name(v.tp_rank, v.pp_rank, v.dp_rank)).string(),
                     manifest.dump());
}

std::string commit_checkpoint(const std::string& dir, const std::string& staging,
                              int64_t expected_shards, const TrainState& state, const RunInfo& run,
                              int keep) {
  json md = {{"format", kFormatName},
             {"version", kFormatVersion},
             {"step", state.step},
             {"consumed_samples", state.consumed_samples},
             {"extra", state.extra},
             {"model", model_to_json(run.model)},
             {"parallel", parallel_to_json(run.par)},
             {"tokenizer", recorded_tokenizer(run)},
             {"created_unix", std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count()},
             {"files", json::object()},
             {"shards", json::array()},
             {"tensors", json::object()}};

  if (state.has_seed) md["seed"] = std::to_string(state.seed);
  if (run.tokenizer_hash) md["tokenizer_hash"] = fmt::format("{:016x}", run.tokenizer_hash);

  // Manifests in name order, so metadata.json does not depend on readdir order.
  std::vector<fs::path> manifests;
  for (const auto& de : fs::directory_iterator(staging)) {
    const std::string n = de.path().filename().string();
    if (n.starts_with("shard-") && n.ends_with(".json")) manifests.push_back(de.path());
  }
  std::sort(manifests.begin(), manifests.end());
  TESSERA_CHECK(int64_t(manifests.size()) == expected_shards,
                "checkpoint {}: {} of {} ranks wrote their shard; not committing", staging,
                manifests.size(), expected_shards);
  for (const fs::path& p : manifests) {
    json m;
    try {
      m = json::parse(read_file(p.string()));
    } catch (const json::exception& e) {
      fail("{}: {}", p.string(), e.what());
    }
    merge_manifest(md, m);
  }
  for (const fs::path& p : manifests) fs::remove(p);
  if (json tok = write_tokenizer_files(staging, run); !tok.is_null()) md["tokenizer_files"] = tok;
  const std::string text = md.dump(1);
  write_file_durable((fs::path(staging) / kMetadataFile).string(), text);
  write_file_durable((fs::path(staging) / kMetadataCrcFile).string(),
                     crc32c_hex(crc32c(text.data(), text.size())) + "\n");
  fsync_dir(staging);

  // The rename is the commit: before it the step does not exist by name.
  const fs::path final_dir = fs::path(dir) / step_dir_name(state.step);
  std::error_code ec;
  fs::path old;
  if (fs::exists(final_dir)) {
    // Saving a step that already exists (a resumed run passing it again):
    // move the old one aside first; rename cannot replace a directory.
    old = fs::path(dir) / fmt::format(".{}.old-{}", step_dir_name(state.step), ::getpid());
    fs::rename(final_dir, old, ec);
    TESSERA_CHECK(!ec, "cannot move {} aside: {}", final_dir.string(), ec.message());
  }
  fs::rename(staging, final_dir, ec);
  TESSERA_CHECK(!ec, "cannot rename {} to {}: {}", staging, final_dir.string(), ec.message());
  fsync_dir(dir);
  write_file_atomic((fs::path(dir) / kLatestFile).string(), step_dir_name(state.step) + "\n");
  if (!old.empty()) fs::remove_all(old, ec);
  prune_steps(dir, keep, state.step);
  return final_dir.string();
}

std::string save_checkpoint(const std::string& dir, const ShardView& shard, const TrainState& state,
                            const RunInfo& run, const SaveOptions& opts) {
  comm::Communicator* c = opts.comm;
  const bool root = !c || c->rank() == 0;
  // The staging name must be the same on every rank: rank 0's pid.
  int64_t tag = ::getpid();
  if (c) c->broadcast(&tag, 2, Precision::Fp32, 0);  // 8 bytes moved as two 4-byte elements
  std::string staging =
      (fs::path(dir) / fmt::format(".{}.tmp-{}", step_dir_name(state.step), tag)).string();
  if (root) staging = begin_staging(dir, state.step, std::to_string(tag));
  if (c) c->barrier();  // the staging directory exists
  // A save that fails (a full disk) removes its staging directory: it would
  // hold the space, and every byte of it is useless. (A kill leaves it; the
  // next writer of the directory removes it: remove_stale_staging.)
  std::string out = (fs::path(dir) / step_dir_name(state.step)).string();
  try {
    write_shard(staging, shard);
    if (c) c->barrier();  // every shard is written and fsynced
    if (root) out = commit_checkpoint(dir, staging, c ? c->size() : 1, state, run, opts.keep);
  } catch (...) {
    std::error_code ec;
    if (root) fs::remove_all(staging, ec);
    throw;
  }
  if (c) c->barrier();  // nobody moves on (or loads) before the commit
  return out;
}

}  // namespace tessera::ckpt
