#include "tessera/cli/flag_suggestion.h"

#include <fmt/format.h>

#include "tessera/core/edit_distance.h"

namespace tessera::cli {

std::string flag_suggestion(const CLI::App& app, const std::vector<std::string>& args) {
  // The subcommand is the first word that names one; its flags are the candidates.
  const CLI::App* sub = &app;
  for (size_t i = 1; i < args.size() && sub == &app; ++i)
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
      if (s->get_name() == args[i]) sub = s;
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  std::vector<std::string> hints;
  for (size_t i = 1; i < args.size(); ++i) {
    std::string word = args[i].substr(0, args[i].find('='));
    if (word.rfind("--", 0) != 0 || word.size() < 3) continue;
    const bool known = std::find(names.begin(), names.end(), word) != names.end();
    if (known) continue;
    std::string best;
    size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;  // a few edits at most
    for (const std::string& n : names)
      if (const size_t d = edit_distance(word, n); d < best_d) best = n, best_d = d;
    if (!best.empty()) hints.push_back(fmt::format("{} for {}", best, word));
  }
  if (hints.empty()) return "";
  std::string s = " (did you mean ";
  for (size_t i = 0; i < hints.size(); ++i) s += (i ? ", " : "") + hints[i];
  return s + "?)";
}

}  // namespace tessera::cli
