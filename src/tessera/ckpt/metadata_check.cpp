// Checking metadata.json against the step directory before anything is read
// or allocated. metadata.crc32c only proves that metadata.json is what some
// writer wrote — anyone can recompute it — so every size and offset in it is
// treated as untrusted input: types are checked, arithmetic cannot wrap, and
// every shard piece must lie inside its (listed, size-checked) file.
#include <filesystem>

#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/ckpt/slice_map.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t need_int(const json& j, const char* key, const std::string& where) {
  TESSERA_CHECK(j.is_object() && j.contains(key) && j[key].is_number_integer(),
                "{}: corrupted ('{}' is not an integer)", where, key);
  return j[key].get<int64_t>();
}

}  // namespace

void check_listed_files(const std::string& step_dir, const json& files, bool verify) {
  TESSERA_CHECK(files.is_object(), "{}: corrupted ('files' is not an object)", step_dir);
  for (const auto& [name, f] : files.items()) {
    TESSERA_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." &&
                      name != "..",
                  "{}: bad file name {}", step_dir, name);
    const std::string path = (fs::path(step_dir) / name).string();
    std::error_code ec;
    TESSERA_CHECK(fs::is_regular_file(path, ec), "{}: missing", path);
    const int64_t want = need_int(f, "bytes", path);
    TESSERA_CHECK(f.contains("crc32c") && f["crc32c"].is_string(),
                  "{}: corrupted (no checksum in metadata.json)", path);
    uint64_t have = fs::file_size(path, ec);
    TESSERA_CHECK(!ec && want >= 0 && have == uint64_t(want),
                  "{}: {} bytes, metadata.json says {} (truncated or damaged)", path, have, want);
    if (verify) {
      uint32_t crc = crc32c_file(path, &have);
      TESSERA_CHECK(have == uint64_t(want), "{}: {} bytes, metadata.json says {}", path, have, want);
      TESSERA_CHECK(crc32c_hex(crc) == f["crc32c"].get<std::string>(),
                    "{}: checksum {} does not match metadata.json's {} (corrupted)", path,
                    crc32c_hex(crc), f["crc32c"].get<std::string>());
    }
  }
}

namespace {

// One shard piece of tensor `tname`: its slice fits the global shape, its
// local range fits the slice, and its bytes fit inside its file.
void check_piece(const std::string& step_dir, const json& files, const std::string& tname,
                 const Shape& global, const json& p, bool need_crc) {
  const std::string where = step_dir + ": tensor " + tname;
  TESSERA_CHECK(p.is_object() && p.contains("file") && p["file"].is_string(),
                "{}: corrupted shard entry", where);
  const std::string file = p["file"].get<std::string>();
  TESSERA_CHECK(files.contains(file), "{} refers to unlisted file {}", where, file);
  const int64_t offset = need_int(p, "byte_offset", where);
  const json& r = p.contains("local_range") ? p["local_range"] : json();
  TESSERA_CHECK(r.is_array() && r.size() == 2 && r[0].is_number_integer() &&
                    r[1].is_number_integer(),
                "{}: corrupted local_range", where);
  const int64_t lo = r[0].get<int64_t>(), hi = r[1].get<int64_t>();
  TESSERA_CHECK(p.contains("slice"), "{}: corrupted (no slice)", where);
  const SliceMap slice = slice_from_json(global, p["slice"]);
  TESSERA_CHECK(lo >= 0 && lo <= hi && hi <= slice.numel(), "{}: has a bad local range [{}, {})",
                where, lo, hi);
  const int64_t file_bytes = files[file]["bytes"].get<int64_t>();
  // (hi - lo) floats from offset, written so that nothing can wrap.
  TESSERA_CHECK(offset >= 0 && offset <= file_bytes &&
                    hi - lo <= (file_bytes - offset) / int64_t(sizeof(float)),
                "{}: runs past the end of {}", where, file);
  if (need_crc)
    TESSERA_CHECK(p.contains("crc32c") && p["crc32c"].is_string(),
                  "{}: corrupted (a shard piece has no checksum)", where);
}

}  // namespace

void check_metadata(const std::string& step_dir, const json& md, bool verify) {
  const json& files = md.at("files");
  check_listed_files(step_dir, files, verify);
  const bool need_crc = md.at("version").get<int>() >= 2;
  const json& tensors = md.at("tensors");
  TESSERA_CHECK(tensors.is_object(), "{}: corrupted ('tensors' is not an object)", step_dir);
  for (const auto& [tname, t] : tensors.items()) {
    TESSERA_CHECK(t.is_object() && t.contains("global_shape") && t.contains("shards") &&
                      t["shards"].is_object(),
                  "{}: tensor {}: corrupted entry", step_dir, tname);
    const Shape global = shape_from_json(t["global_shape"]);
    for (const auto& [kind, pieces] : t["shards"].items()) {
      TESSERA_CHECK(pieces.is_array(), "{}: tensor {}: corrupted {} list", step_dir, tname, kind);
      for (const auto& p : pieces) check_piece(step_dir, files, tname, global, p, need_crc);
    }
  }
}

}  // namespace tessera::ckpt
