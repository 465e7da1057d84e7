// The tokenizer travels inside the checkpoint: its BPE files are copied
// into STEP/tokenizer/ (vocab.json, merges.txt) and checksummed like every
// other file, so a checkpoint is self-contained: `tessera generate` and
// `export` work from any directory, after the original files moved or
// changed, and a resume can tell that its tokenizer is the one the model
// was trained with.
//
// metadata.json: "tokenizer" keeps the source (an absolute directory,
// "bytes" or ""), for the reader; "tokenizer_files" lists the copies as
// "files" does ({"vocab.json": {"bytes", "crc32c"}, "merges.txt": {...}}).
// Checkpoints without "tokenizer_files" (written before) name the source only.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace tessera::ckpt {

struct RunInfo;
struct Checkpoint;

inline constexpr const char* kTokenizerDir = "tokenizer";

// The vocab.json and merges.txt to copy for `run`: its vocab_file and
// merge_file, or else vocab.json and merges.txt in run.tokenizer when that
// is a directory; nullopt for "bytes" or no tokenizer.
std::optional<std::pair<std::string, std::string>> tokenizer_sources(const RunInfo& run);

// Throws tessera::Error naming the file unless the sources are readable
// regular files: for callers that must fail before long work (a save).
void check_tokenizer_sources(const RunInfo& run);

// Copy the tokenizer of `run` into staging/tokenizer/ (fsynced). Returns
// the "tokenizer_files" entry, or null when there is nothing to copy.
nlohmann::json write_tokenizer_files(const std::string& staging, const RunInfo& run);

// Reader side: check the "tokenizer_files" entry (names, sizes, CRC32C when
// verify) and return the directory holding the copies ("" if none).
std::string check_tokenizer_files(const std::string& step_dir, const nlohmann::json& metadata,
                                  bool verify);

// A resume from `ck` with the BPE files (vocab_file, merge_file): throws
// naming both unless they are byte for byte the checkpoint's copies. Does
// nothing when either side has no BPE files (bytes, older checkpoints).
void check_same_tokenizer(const Checkpoint& ck, const std::string& vocab_file,
                          const std::string& merge_file);

}  // namespace tessera::ckpt
