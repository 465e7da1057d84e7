// "did you mean --lr?" for a mistyped flag: CLI11 says only which arguments
// it did not expect.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tessera::cli {

// For the command line `args` (program name first) that `app` refused as
// unexpected: " (did you mean --lr for --lrr?)" naming, for each unknown
// --flag, the closest long flag of the chosen subcommand within a few
// edits; "" when none is close.
std::string flag_suggestion(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace tessera::cli
