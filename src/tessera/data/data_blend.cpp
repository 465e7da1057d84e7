#include "tessera/data/data_blend.h"

#include <cmath>
#include <cstdlib>

#include "tessera/core/error.h"

namespace tessera::data {

namespace {

// The whole word as a number, or NaN when it is not one (a path).
double as_number(const std::string& w) {
  if (w.empty()) return std::nan("");
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  return end == w.c_str() + w.size() ? v : std::nan("");
}

}  // namespace

DataBlend parse_data_blend(const std::vector<std::string>& words, const std::string& flag) {
  DataBlend b;
  if (words.empty() || std::isnan(as_number(words.front()))) {
    for (const auto& w : words)
      TESSERA_CHECK(std::isnan(as_number(w)),
                    "{}: '{}' looks like a weight, but the list starts with a path (a blend is "
                    "weight path weight path ...)",
                    flag, w);
    b.paths = words;
    return b;
  }
  TESSERA_CHECK(words.size() % 2 == 0,
                "{}: a blend is weight path pairs (0.7 a 0.3 b); got {} words", flag, words.size());
  double sum = 0;
  for (size_t i = 0; i < words.size(); i += 2) {
    const double w = as_number(words[i]);
    TESSERA_CHECK(std::isfinite(w) && w > 0,
                  "{}: blend weight '{}' must be a finite number > 0", flag, words[i]);
    TESSERA_CHECK(std::isnan(as_number(words[i + 1])),
                  "{}: expected a path after weight {}, got the number '{}'", flag, words[i],
                  words[i + 1]);
    b.weights.push_back(w);
    b.paths.push_back(words[i + 1]);
    sum += w;
  }
  // Weights each finite can still sum to inf (1e308 1e308): every share would be 0.
  TESSERA_CHECK(std::isfinite(sum), "{}: the blend weights sum past the largest number", flag);
  for (double& w : b.weights) w /= sum;
  return b;
}

SplitFractions parse_split(const std::string& text) {
  std::vector<double> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find_first_of(",/", begin);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(begin, end - begin);
    const double v = as_number(word);
    TESSERA_CHECK(std::isfinite(v) && v >= 0,
                  "--split: '{}' is not a share >= 0 (expected e.g. 969,30,1)", clipped(word));
    parts.push_back(v);
    begin = end + 1;
  }
  TESSERA_CHECK(parts.size() <= 3, "--split: at most three shares (train,valid,test), got '{}'",
                clipped(text));
  parts.resize(3, 0.0);
  const double sum = parts[0] + parts[1] + parts[2];
  // Shares each finite can sum to inf (1e308,1e308,1): the fractions would be 0 and nan.
  TESSERA_CHECK(std::isfinite(sum), "--split: the shares of '{}' sum past the largest number",
                clipped(text));
  TESSERA_CHECK(parts[0] > 0, "--split: the training share must be > 0 (got '{}')", text);
  return {parts[0] / sum, parts[1] / sum, parts[2] / sum};
}

}  // namespace tessera::data
