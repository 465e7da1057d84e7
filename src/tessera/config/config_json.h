// The model and parallel configs as a checkpoint's metadata.json (and a
// metrics file's run header) spell them. Reading is
// strict about what a model needs (a missing size is an error naming the
// key) and lenient about the rest (defaults), so older files stay readable.
#pragma once
#include <nlohmann/json.hpp>

#include "tessera/config/gpt_config.h"
#include "tessera/config/parallel_config.h"

namespace tessera {

nlohmann::json model_to_json(const GPTConfig& m);
GPTConfig model_from_json(const nlohmann::json& j);  // validates

nlohmann::json parallel_to_json(const ParallelConfig& p);
ParallelConfig parallel_from_json(const nlohmann::json& j);

// "" when the two models have the same shapes (every size that decides a
// parameter's shape), else a message naming the first difference.
std::string model_difference(const GPTConfig& a, const GPTConfig& b);

}  // namespace tessera
