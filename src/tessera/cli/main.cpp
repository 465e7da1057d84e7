// tessera: train GPT-style models with tensor, pipeline and sharded data
// parallelism, and plan the layout before spending an allocation on it.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <exception>
#include <new>

#include "tessera/cli/commands.h"
#include "tessera/cli/config_file.h"
#include "tessera/cli/flag_suggestion.h"
#include "tessera/core/error.h"
#include "tessera/train/exit_signals.h"

// An error line stays readable whatever input it quotes (tessera::clipped).
constexpr size_t kMaxMessage = 2000;

int main(int argc, char** argv) {
  // First, while this is the only thread: SIGTERM and SIGINT must never be
  // handled on a thread inside a oneDNN GEMM (why: train/exit_signals.h).
  tessera::route_exit_signals_to_own_thread();
  CLI::App app{
      "tessera: train GPT-style language models (tensor, pipeline and sharded data parallelism)\n"
      "and plan their layout. Run `tessera <command> --help` for each command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  // A flag given twice keeps its last value: --config expands the file's
  // settings before the command line's own flags, which therefore win.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  tessera::cli::register_train(app);
  tessera::cli::register_bench(app);
  tessera::cli::register_tokenize(app);
  tessera::cli::register_plan(app);
  tessera::cli::register_calibrate(app);
  tessera::cli::register_generate(app);
  tessera::cli::register_plot(app);
  tessera::cli::register_export(app);  // export and import
  tessera::cli::register_eval(app);
  tessera::cli::register_tune(app);
  std::vector<std::string> args(argv, argv + argc);
  try {
    args = tessera::cli::expand_config_files(argc, argv, app);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    app.parse(int(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "tessera: error: {}{}\nRun `tessera --help` or `tessera <command> --help`.\n",
               tessera::clipped(e.what(), kMaxMessage), tessera::cli::flag_suggestion(app, args));
    return 2;
  } catch (const tessera::ReportedError&) {
    return 2;  // already printed (a multi-rank job reports once)
  } catch (const tessera::Error& e) {
    fmt::print(stderr, "tessera: error: {}\n", tessera::clipped(e.what(), kMaxMessage));
    return 2;
  } catch (const std::bad_alloc&) {
    // What no size check foresaw: still one line and exit 2, never an abort.
    fmt::print(stderr, "tessera: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    // A library's exception no check turned into a tessera::Error (a
    // filesystem error, a JSON type error): one line and exit 2 as well.
    fmt::print(stderr, "tessera: error: {}\n", tessera::clipped(e.what(), kMaxMessage));
    return 2;
  } catch (...) {
    fmt::print(stderr, "tessera: error: unknown exception\n");
    return 2;
  }
  return 0;
}
