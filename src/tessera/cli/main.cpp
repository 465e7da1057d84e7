// tessera: train GPT-style models with tensor, pipeline and sharded data
// parallelism, and plan the layout before spending an allocation on it.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "tessera/cli/commands.h"
#include "tessera/core/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tessera: train GPT-style language models (tensor, pipeline and sharded data parallelism)\n"
      "and plan their layout. Run `tessera <command> --help` for each command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  tessera::cli::register_train(app);
  tessera::cli::register_bench(app);
  tessera::cli::register_tokenize(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tessera::Error& e) {
    fmt::print(stderr, "tessera: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
