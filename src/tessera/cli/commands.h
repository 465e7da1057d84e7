// Each subcommand lives in its own file and registers itself on the root app.
#pragma once
#include <CLI/CLI.hpp>

namespace tessera::cli {

void register_train(CLI::App& app);
void register_bench(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_plan(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_generate(CLI::App& app);
void register_plot(CLI::App& app);
void register_export(CLI::App& app);  // `export` and `import`
void register_eval(CLI::App& app);
void register_tune(CLI::App& app);

}  // namespace tessera::cli
