// Reading a checkpoint: resolving `latest` with fallback, verifying files,
// assembling tensors by global index for any reader layout.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/config/config_json.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/core/error.h"
#include "tessera/model/gpt.h"
#include "tessera/optim/adamw.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_metadata(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kMetadataFile).string();
  std::error_code ec;
  TESSERA_CHECK(fs::exists(path, ec), "{}: missing (not a committed checkpoint)", path);
  const std::string text = read_file(path);
  const std::string crc_path = (fs::path(step_dir) / kMetadataCrcFile).string();
  TESSERA_CHECK(fs::exists(crc_path, ec), "{}: missing", crc_path);
  std::string want = read_file(crc_path);
  while (!want.empty() && std::isspace(static_cast<unsigned char>(want.back()))) want.pop_back();
  const std::string have = crc32c_hex(crc32c(text.data(), text.size()));
  TESSERA_CHECK(have == want, "{}: checksum {} does not match {}'s {} (corrupted)", path, have,
                crc_path, want);
  json md;
  try {
    md = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: corrupted ({})", path, e.what());
  }
  TESSERA_CHECK(md.is_object() && md.value("format", "") == kFormatName,
                "{}: not a tessera checkpoint", path);
  const json& v = md.contains("version") ? md["version"] : json();
  TESSERA_CHECK(v.is_number_integer() && v.get<int64_t>() >= kOldestReadableVersion &&
                    v.get<int64_t>() <= kFormatVersion,
                "{}: format version {} (this build reads {} to {})", path, v.dump(),
                kOldestReadableVersion, kFormatVersion);
  for (const char* key : {"step", "files", "tensors", "model"})
    TESSERA_CHECK(md.contains(key), "{}: corrupted (no '{}')", path, key);
  return md;
}

// The seed is stored as a decimal string (JSON readers lose 64-bit integers).
uint64_t parse_seed(const std::string& s, const std::string& step_dir) {
  uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 20;
  for (char c : s) {
    ok = ok && c >= '0' && c <= '9' && !__builtin_mul_overflow(v, 10u, &v) &&
         !__builtin_add_overflow(v, uint64_t(c - '0'), &v);
  }
  TESSERA_CHECK(ok, "{}/{}: corrupted seed '{}'", step_dir, kMetadataFile, s);
  return v;
}

// The tokenizer hash: 16 lowercase hex digits (as fmt's {:016x} wrote it);
// absent in checkpoints written before it was recorded (0: unknown).
uint64_t parse_tokenizer_hash(const json& md, const std::string& step_dir) {
  if (!md.contains("tokenizer_hash")) return 0;
  const json& j = md["tokenizer_hash"];
  const std::string s = j.is_string() ? j.get<std::string>() : j.dump();
  bool ok = j.is_string() && s.size() == 16;
  uint64_t v = 0;
  for (char c : s) {
    const bool digit = c >= '0' && c <= '9', letter = c >= 'a' && c <= 'f';
    ok = ok && (digit || letter);
    v = v * 16 + uint64_t(digit ? c - '0' : c - 'a' + 10);
  }
  TESSERA_CHECK(ok, "{}/{}: corrupted tokenizer_hash '{}' (want 16 hex digits)", step_dir,
                kMetadataFile, s.substr(0, 40));
  return v;
}

Checkpoint from_metadata(const std::string& step_dir, json md) {
  Checkpoint ck;
  ck.path = step_dir;
  ck.state.step = md.at("step").get<int64_t>();
  ck.state.consumed_samples = md.value("consumed_samples", int64_t(0));
  ck.state.has_seed = md.contains("seed");  // an import records none
  ck.state.seed = parse_seed(md.value("seed", std::string("0")), step_dir);
  ck.state.extra = md.value("extra", json::object());
  try {
    ck.run.model = model_from_json(md.at("model"));
    ck.run.par = parallel_from_json(md.value("parallel", json::object()));
  } catch (const Error& e) {
    fail("{}/{}: {}", step_dir, kMetadataFile, e.what());
  }
  ck.run.tokenizer = md.value("tokenizer", std::string());
  ck.run.tokenizer_hash = parse_tokenizer_hash(md, step_dir);
  for (const auto& [name, t] : md.at("tensors").items())
    if (t.at("shards").contains("exp_avg")) ck.has_optimizer_state = true;
  ck.metadata = std::move(md);
  return ck;
}

Checkpoint open_step(const std::string& step_dir, bool verify) {
  // A JSON field of the wrong type throws json::exception from deep inside
  // nlohmann; it is a corrupted file like any other, named as such.
  try {
    json md = read_metadata(step_dir);
    check_metadata(step_dir, md, verify);
    const std::string tokenizer_copies = check_tokenizer_files(step_dir, md, verify);
    Checkpoint ck = from_metadata(step_dir, std::move(md));
    // The checkpoint's own copy of the tokenizer wins over the recorded source.
    if (!tokenizer_copies.empty()) ck.run.tokenizer = tokenizer_copies;
    return ck;
  } catch (const json::exception& e) {
    fail("{}/{}: corrupted ({})", step_dir, kMetadataFile, e.what());
  }
}

}  // namespace

void verify_checkpoint(const std::string& step_dir) { open_step(step_dir, true); }

Checkpoint open_checkpoint(const std::string& dir, bool verify) {
  std::error_code ec;
  TESSERA_CHECK(fs::is_directory(dir, ec), "checkpoint {}: no such directory", dir);
  fs::path p(dir);
  if (p.filename().empty()) p = p.parent_path();  // "dir/"
  if (fs::exists(p / kMetadataFile, ec) || parse_step_dir(p.filename().string()))
    return open_step(dir, verify);

  // A root: `latest` first, then each older step, newest first. Staging
  // directories are never candidates (their names do not parse as steps).
  const std::string latest = read_latest(dir);
  auto steps = list_steps(dir);
  std::vector<std::string> notes;
  std::optional<int64_t> latest_step = parse_step_dir(latest);
  if (!latest_step) {
    if (!steps.empty())
      notes.push_back(fmt::format("{}/latest is missing or unreadable; trying the newest step",
                                  dir));
  }
  std::vector<std::string> reasons;
  for (const auto& [step, path] : steps) {
    if (latest_step && step > *latest_step) continue;  // never committed as latest
    try {
      Checkpoint ck = open_step(path, verify);
      if (!reasons.empty())
        notes.push_back(fmt::format("using the previous good checkpoint {}", path));
      ck.notes.insert(ck.notes.begin(), notes.begin(), notes.end());
      return ck;
    } catch (const Error& e) {
      reasons.push_back(e.what());
      notes.push_back(fmt::format("{} is unusable: {}", path, e.what()));
    }
  }
  if (steps.empty()) fail("checkpoint {}: no step directories (nothing saved yet?)", dir);
  std::string all;
  for (const auto& r : reasons) all += "\n  " + r;
  fail("checkpoint {}: no usable step directory:{}", dir, all);
}

namespace {

// One piece of a stored tensor: elements [lo, hi) of a writer's slice.
struct Piece {
  std::string file;
  uint64_t byte_offset;
  int64_t lo, hi;
  SliceMap slice;
};

// Gathers a stored tensor into a full global buffer, then the reader takes
// its slice. Simple and layout-agnostic; a tensor at a time bounds memory.
class TensorReader {
 public:
  explicit TensorReader(const Checkpoint& ck) : ck_(ck) {}
  ~TensorReader() {
    for (auto& [n, fd] : fds_) ::close(fd);
  }

  // Fill out[local - lo] for local elements [lo, hi) of the reader's slice
  // `mine` of `name`. false if the checkpoint has no `kind` for the tensor.
  bool read(const std::string& name, const char* kind, const SliceMap& mine, int64_t lo, int64_t hi,
            float* out) {
    const json& tensors = ck_.metadata.at("tensors");
    TESSERA_CHECK(tensors.contains(name), "checkpoint {} has no tensor {}", ck_.path, name);
    const json& t = tensors.at(name);
    if (!t.at("shards").contains(kind)) return false;
    const Shape stored = shape_from_json(t.at("global_shape"));
    check_shape(name, stored, mine.global);
    // Only the stored elements the reader can use are kept: check_shape
    // allows the token table's padding rows to differ, and rows past the
    // reader's table are padding. So memory is bounded by the reader's own
    // model, never by a row count read from the file.
    const int64_t kept = std::min(stored.numel(), mine.global.numel());

    // (kept,) of the stored tensor, row-major; `have` marks what some shard covered.
    std::unique_ptr<float[]> global(new float[size_t(kept)]);
    std::vector<uint8_t> have(size_t(kept), 0);
    std::vector<float> buf;
    for (const json& jp : t.at("shards").at(kind)) {
      Piece p{jp.at("file"), jp.at("byte_offset"), jp.at("local_range")[0], jp.at("local_range")[1],
              slice_from_json(stored, jp.at("slice"))};
      TESSERA_CHECK(p.lo >= 0 && p.lo <= p.hi && p.hi <= p.slice.numel(),
                    "checkpoint {}: tensor {} has a bad local range", ck_.path, name);
      buf.resize(size_t(p.hi - p.lo));
      const std::string path = (fs::path(ck_.path) / p.file).string();
      read_exact(fd(path), buf.data(), buf.size() * sizeof(float), p.byte_offset, path);
      check_piece_crc(jp, buf, name, kind, path);
      p.slice.for_each_run(p.lo, p.hi, [&](int64_t l, int64_t g, int64_t n) {
        const int64_t use = std::clamp<int64_t>(kept - g, 0, n);
        if (use == 0) return;
        std::memcpy(&global[size_t(g)], &buf[size_t(l - p.lo)], size_t(use) * sizeof(float));
        std::memset(&have[size_t(g)], 1, size_t(use));
      });
    }
    // The vocabulary tables' padding rows depend on tp; rows past the
    // stored table are padding (zero), never real vocabulary.
    const int64_t stored_n = kept;
    mine.for_each_run(lo, hi, [&](int64_t l, int64_t g, int64_t n) {
      float* dst = out + (l - lo);
      const int64_t inside = std::clamp<int64_t>(stored_n - g, 0, n);
      if (inside > 0) {
        const void* gap = std::memchr(&have[size_t(g)], 0, size_t(inside));
        TESSERA_CHECK(!gap, "checkpoint {}: no shard holds element {} of {} ({})", ck_.path,
                      g + (static_cast<const uint8_t*>(gap) - &have[size_t(g)]), name, kind);
        std::memcpy(dst, &global[size_t(g)], size_t(inside) * sizeof(float));
      }
      std::fill(dst + inside, dst + n, 0.0f);
    });
    return true;
  }

 private:
  // Version 2 pieces carry the CRC32C of their own bytes: metadata pointing
  // at the right file but another tensor's bytes reads intact data, and
  // only this catches it.
  void check_piece_crc(const json& jp, const std::vector<float>& buf, const std::string& name,
                       const char* kind, const std::string& path) {
    if (!jp.contains("crc32c")) return;  // version 1 (check_metadata requires it from 2 on)
    const std::string have = crc32c_hex(crc32c(buf.data(), buf.size() * sizeof(float)));
    TESSERA_CHECK(have == jp["crc32c"].get<std::string>(),
                  "checkpoint {}: the bytes of {} ({}) in {} have checksum {}, metadata.json "
                  "says {} (metadata points at the wrong bytes, or they are damaged)",
                  ck_.path, name, kind, path, have, jp["crc32c"].get<std::string>());
  }

  void check_shape(const std::string& name, const Shape& stored, const Shape& want) {
    if (stored == want) return;
    // Only the vocabulary padding may differ (it is rounded up to a multiple
    // of tp * make_vocab_size_divisible_by); the real rows must all exist.
    const int64_t V = ck_.run.model.vocab_size;
    const bool vocab_rows = name == "wte" || name == "lm_head.weight";
    bool ok = vocab_rows && stored.ndim == 2 && want.ndim == 2 && stored[1] == want[1] &&
              stored[0] >= V && want[0] >= V;
    TESSERA_CHECK(ok, "checkpoint {}: tensor {} is {} but this model's is {}", ck_.path, name,
                  stored.str(), want.str());
  }

  int fd(const std::string& path) {
    auto it = fds_.find(path);
    if (it != fds_.end()) return it->second;
    int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    TESSERA_CHECK(f >= 0, "cannot open {}: {}", path, std::strerror(errno));
    fds_[path] = f;
    return f;
  }

  const Checkpoint& ck_;
  std::map<std::string, int> fds_;
};

// For every entry of layout overlapping [begin, end): fn(entry, lo, hi, out offset).
template <typename F>
void for_each_overlap(const ParamLayout& layout, int64_t begin, int64_t end, F&& fn) {
  for (const ParamEntry& e : layout.entries()) {
    const int64_t a = std::max(begin, e.offset), z = std::min(end, e.offset + e.numel());
    if (a < z) fn(e, a - e.offset, z - e.offset, a - begin);
  }
}

}  // namespace

void load_params(const Checkpoint& ck, const ParamLayout& layout, int64_t begin, int64_t end,
                 float* out) {
  TensorReader r(ck);
  std::fill(out, out + (end - begin), 0.0f);
  for_each_overlap(layout, begin, end, [&](const ParamEntry& e, int64_t lo, int64_t hi, int64_t o) {
    TESSERA_CHECK(r.read(e.name, "params", slice_of(layout, e), lo, hi, out + o),
                  "checkpoint {} has no parameters for {}", ck.path, e.name);
  });
}

void load_optimizer(const Checkpoint& ck, const ParamLayout& layout, int64_t begin, int64_t end,
                    float* exp_avg, float* exp_avg_sq) {
  std::fill(exp_avg, exp_avg + (end - begin), 0.0f);  // padding, and a fresh start
  std::fill(exp_avg_sq, exp_avg_sq + (end - begin), 0.0f);
  if (!ck.has_optimizer_state) return;
  TensorReader r(ck);
  for_each_overlap(layout, begin, end, [&](const ParamEntry& e, int64_t lo, int64_t hi, int64_t o) {
    SliceMap s = slice_of(layout, e);
    TESSERA_CHECK(r.read(e.name, "exp_avg", s, lo, hi, exp_avg + o) &&
                      r.read(e.name, "exp_avg_sq", s, lo, hi, exp_avg_sq + o),
                  "checkpoint {} has no optimizer state for {}", ck.path, e.name);
  });
}

void check_same_model(const Checkpoint& ck, const GPTConfig& want) {
  std::string diff = model_difference(ck.run.model, want);
  TESSERA_CHECK(diff.empty(), "checkpoint {} holds a different model ({}: checkpoint vs this run)",
                ck.path, diff);
}

void load_into(const Checkpoint& ck, GPT& model, AdamW* optim) {
  check_same_model(ck, model.config());
  load_params(ck, model.layout(), 0, model.layout().numel(), model.params().f32());
  if (optim)
    for (const FlatSegment& s : optim->segments())
      load_optimizer(ck, model.layout(), s.global_begin, s.global_end,
                     optim->exp_avg().f32() + s.shard_offset,
                     optim->exp_avg_sq().f32() + s.shard_offset);
}

}  // namespace tessera::ckpt

namespace tessera::ckpt {

std::unique_ptr<GPT> load_whole_model(const Checkpoint& ck) {
  ParamLayout L = ParamLayout::build(ck.run.model, ParallelConfig{}, 0, 0);
  auto model = std::make_unique<GPT>(ck.run.model, L);
  load_params(ck, model->layout(), 0, L.numel(), model->params().f32());
  return model;
}

}  // namespace tessera::ckpt
