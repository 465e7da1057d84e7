// `--config FILE`: a TOML file whose keys are a subcommand's long flag names
// (num-layers = 6). The file's settings are expanded into flags placed
// before the command line's own, and every option keeps the last value it
// is given, so flags on the command line override the file.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tessera::cli {

// Declares a subcommand's `--config FILE` as this TOML file (shown in --help;
// main() expands it before parsing). Only options declared here are
// expanded: another subcommand's own --config (import's config.json) is an
// ordinary option.
CLI::Option* add_config_file_option(CLI::App* sub);

// argv with each `--config FILE` (or `--config=FILE`) of a subcommand that
// declared it with add_config_file_option replaced by the flags the file
// holds. Throws tessera::Error naming the file for a missing or
// unreadable file, a TOML syntax error, or a key that is not a flag of the
// subcommand.
std::vector<std::string> expand_config_files(int argc, char** argv, const CLI::App& app);

}  // namespace tessera::cli
