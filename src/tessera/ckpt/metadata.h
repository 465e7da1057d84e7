// metadata.json, the one file that says what a checkpoint holds:
//
// {
//   "format": "tessera-checkpoint", "version": 2,
//   "step": 100, "consumed_samples": 6400, "seed": "1234", "extra": {...},
//   "model": {num_layers, hidden_size, ...}, "parallel": {tp, pp, dp, zero_stage, ...},
//   "tokenizer": "bytes" | "/path/to/tokenizer" | "",   (the source; absolute)
//   "tokenizer_files": {"vocab.json": {"bytes", "crc32c"}, "merges.txt": {...}},
//                      (the copies in tokenizer/, tokenizer_files.h; absent for bytes)
//   "tokenizer_hash": "8aa01b7e740d41d2",  (16 hex digits, Tokenizer::hash(); absent: unknown)
//   "files": { "params-tp00-pp00-dp000.bin": {"bytes": 4096, "crc32c": "0x1a2b3c4d"}, ... },
//   "shards": [ {"tp": 0, "pp": 0, "dp": 0, "params_ranges": [[0, 1024]],
//                "optim_ranges": [[0, 512], [2048, 2560]]}, ... ],
//   "tensors": {
//     "h.0.attn.qkv.weight": {
//       "global_shape": [96, 32], "dtype": "F32",
//       "shards": { "params": [ {"file": "params-tp00-pp00-dp000.bin", "byte_offset": 8704,
//                                "local_range": [0, 3072], "crc32c": "0x5e6f7a8b",
//                                "slice": {"blocks": [{"start": [0, 0], "shape": [96, 32]}]},
//                                "tp": 0, "pp": 0, "dp": 0} ],
//                   "exp_avg": [...], "exp_avg_sq": [...] } }, ... }
// }
//
// A shard entry says: elements [local_range) of this rank's slice of the
// tensor (the slice's place in the global tensor given by its blocks, see
// slice_map.h) are stored as little-endian fp32 from byte_offset of file.
// crc32c (version 2) is the CRC32C of those bytes alone: the files' CRCs
// prove the bytes are intact, this proves metadata points at the right ones
// (an offset moved onto another tensor's bytes is caught). Version 1 files
// have no per-piece checksum and are still read.
// The seed and the tokenizer hash are strings because JSON readers lose
// 64-bit integers; an import (`tessera import`, trained by no run yet) has
// no seed.
// metadata.crc32c holds metadata.json's own CRC32C ("0x1a2b3c4d\n"), so a
// flipped digit that still parses (an offset, a checksum) is caught too.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tessera::ckpt {

inline constexpr const char* kFormatName = "tessera-checkpoint";
inline constexpr const char* kMetadataFile = "metadata.json";
inline constexpr const char* kMetadataCrcFile = "metadata.crc32c";
inline constexpr const char* kLatestFile = "latest";
inline constexpr std::array<const char*, 3> kKinds = {"params", "exp_avg", "exp_avg_sq"};

// "params-tp00-pp00-dp000.bin"
std::string shard_file_name(const char* kind, int64_t tp, int64_t pp, int64_t dp);
// "shard-tp00-pp00-dp000.json": a rank's manifest in the staging directory
std::string shard_manifest_name(int64_t tp, int64_t pp, int64_t dp);

// Merge rank manifests ({"files", "shard", "tensors"} each) into the
// "files", "shards" and "tensors" of metadata. Throws if two shards
// disagree on a tensor's global shape.
void merge_manifest(nlohmann::json& metadata, const nlohmann::json& manifest);

// `files` ({name: {"bytes", "crc32c"}}): every name is plain (no '/'),
// and dir/name is there with its size (and CRC32C when verify).
void check_listed_files(const std::string& dir, const nlohmann::json& files, bool verify);

// Before anything is read or allocated: every file listed in metadata exists
// with its size (and CRC32C when verify); every tensor's shape, slices,
// ranges and byte offsets are well-typed, cannot overflow and stay inside
// their files; version >= 2 pieces carry their own checksum. Throws
// tessera::Error naming the step directory or file.
void check_metadata(const std::string& step_dir, const nlohmann::json& metadata, bool verify);

}  // namespace tessera::ckpt
