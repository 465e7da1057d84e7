// What `--data-path` names: either files read end to end as one sequence
// (`--data-path a.bin b.bin`), or Megatron-LM's weighted blend
// (`--data-path 0.7 a.bin 0.3 b.bin`: weight, path, weight, path...),
// where each file is sampled on its own and the run draws from file d a
// share weights[d] / sum(weights) of its samples.
#pragma once
#include <string>
#include <vector>

namespace tessera::data {

struct DataBlend {
  std::vector<std::string> paths;
  std::vector<double> weights;  // (paths,) normalised to sum 1; empty: not a blend
  bool weighted() const { return !weights.empty(); }
};

// Parses the words of `flag` (e.g. "--data-path"). A blend is recognised by
// a number first; its weights must be finite and > 0, every weight needs a
// path. Throws tessera::Error naming the flag and the bad word.
DataBlend parse_data_blend(const std::vector<std::string>& words, const std::string& flag);

// Megatron-LM's `--split 969,30,1` (or with '/'): train, validation and
// test shares of each file, normalised to fractions. One or two numbers
// leave the rest 0. Throws tessera::Error naming --split.
struct SplitFractions {
  double train = 1, valid = 0, test = 0;
};
SplitFractions parse_split(const std::string& text);

}  // namespace tessera::data
