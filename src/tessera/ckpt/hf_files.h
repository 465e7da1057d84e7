// What every Hugging Face export and import shares, whichever architecture:
// the output directory's preparation, the two files' writing, and the
// refusal of tensors a model has no place for.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ckpt/safetensors.h"
#include "tessera/config/gpt_config.h"

namespace tessera::ckpt {

// Creates out_dir and removes the temporaries of an export that was killed
// before its renames (a failed write removes its own): they would hold the
// disk until someone noticed.
void prepare_export_dir(const std::string& out_dir);

// config.json's keys, typed: a missing required key or a wrong type is one
// line naming the key (not nlohmann's type_error). Optional keys give `def`
// when absent.
int64_t config_integer(const nlohmann::json& c, const char* key);
double config_number(const nlohmann::json& c, const char* key, double def);
bool config_boolean(const nlohmann::json& c, const char* key, bool def);

// out_dir/model.safetensors (with the metadata transformers' loader
// expects), or its shards and index when max_shard_bytes > 0 and the
// tensors pass it (hf_shards.h), and out_dir/config.json, each written
// atomically.
void write_export(SafetensorsWriter& w, const std::string& out_dir, const nlohmann::json& config,
                  uint64_t max_shard_bytes = 0);

// Throws naming up to four of `unplaced` (tensors of the file at `path`
// that model m has no place for), if there are any.
void refuse_unplaced(const std::string& path, const GPTConfig& m,
                     const std::vector<std::string>& unplaced);

}  // namespace tessera::ckpt
