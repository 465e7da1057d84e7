#include "tessera/tune/trial_log.h"

#include <fmt/core.h>

#include <fstream>

#include "tessera/core/error.h"

namespace tessera::tune {

std::vector<Trial> read_trial_log(const std::string& path) {
  std::ifstream in(path);
  TESSERA_CHECK(in.good(), "--resume {}: cannot read it", path);
  std::vector<Trial> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("--resume {} line {}: not JSON ({})", path, n, e.what());
    }
    out.push_back(trial_from_json(j, fmt::format("--resume {} line {}", path, n)));
  }
  return out;
}

void append_trial_log(const std::string& path, const Trial& t) {
  std::ofstream out(path, std::ios::app);
  out << trial_to_json(t).dump() << "\n";
  out.flush();
  TESSERA_CHECK(out.good(), "--log {}: cannot append the trial (disk full?)", path);
}

}  // namespace tessera::tune
