#include "tessera/ckpt/tokenizer_files.h"

#include <filesystem>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/crc32c.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/metadata.h"
#include "tessera/core/error.h"
#include "tessera/core/regular_file.h"

namespace tessera::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The copies' names: what data::Tokenizer::load(dir) and Hugging Face's
// GPT2TokenizerFast read from a directory.
constexpr const char* kVocab = "vocab.json";
constexpr const char* kMerges = "merges.txt";

}  // namespace

std::optional<std::pair<std::string, std::string>> tokenizer_sources(const RunInfo& run) {
  if (!run.vocab_file.empty() || !run.merge_file.empty())
    return std::make_pair(run.vocab_file, run.merge_file);
  if (run.tokenizer.empty() || run.tokenizer == "bytes") return std::nullopt;
  return std::make_pair((fs::path(run.tokenizer) / kVocab).string(),
                        (fs::path(run.tokenizer) / kMerges).string());
}

void check_tokenizer_sources(const RunInfo& run) {
  if (auto src = tokenizer_sources(run)) {
    require_regular_file(src->first, "tokenizer");
    require_regular_file(src->second, "tokenizer");
  }
}

json write_tokenizer_files(const std::string& staging, const RunInfo& run) {
  auto src = tokenizer_sources(run);
  if (!src) return json();
  const fs::path dir = fs::path(staging) / kTokenizerDir;
  std::error_code ec;
  fs::create_directory(dir, ec);
  TESSERA_CHECK(!ec, "cannot create {}: {}", dir.string(), ec.message());
  json files = json::object();
  for (const auto& [from, name] : {std::pair{src->first, kVocab}, std::pair{src->second, kMerges}}) {
    const std::string bytes = read_regular_file(from, "tokenizer");
    DurableWriter w((dir / name).string());
    w.write(bytes.data(), bytes.size());
    w.close();
    files[name] = {{"bytes", w.bytes()}, {"crc32c", crc32c_hex(w.crc())}};
  }
  fsync_dir(dir.string());
  return files;
}

std::string check_tokenizer_files(const std::string& step_dir, const json& md, bool verify) {
  if (!md.contains("tokenizer_files")) return "";
  const json& files = md["tokenizer_files"];
  TESSERA_CHECK(files.is_object() && files.size() == 2 && files.contains(kVocab) &&
                    files.contains(kMerges),
                "{}/{}: corrupted ('tokenizer_files' must list {} and {})", step_dir,
                kMetadataFile, kVocab, kMerges);
  const std::string dir = (fs::path(step_dir) / kTokenizerDir).string();
  check_listed_files(dir, files, verify);
  return dir;
}

void check_same_tokenizer(const Checkpoint& ck, const std::string& vocab_file,
                          const std::string& merge_file) {
  if (vocab_file.empty() || merge_file.empty() || !ck.metadata.contains("tokenizer_files")) return;
  const fs::path copies = fs::path(ck.path) / kTokenizerDir;
  for (const auto& [mine, name] : {std::pair{vocab_file, kVocab}, std::pair{merge_file, kMerges}}) {
    const std::string theirs = (copies / name).string();
    TESSERA_CHECK(read_regular_file(mine, "tokenizer") == read_regular_file(theirs, "tokenizer"),
                  "--load {}: the checkpoint was trained with another tokenizer ({} differs from "
                  "its copy {})",
                  ck.path, mine, theirs);
  }
}

}  // namespace tessera::ckpt
