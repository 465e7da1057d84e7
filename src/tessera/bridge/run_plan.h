// Between `tessera train` and `tessera plan`: one vocabulary for a run.
// A train run's config completed as the planner needs it, the layout the
// planner prices for it, and a planned layout written back as train flags or
// a train --config TOML file. (Reading the file itself is cli's: it parses
// train's own flags, cli/train_run.h.)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plan/layout.h"
#include "tessera/plan/layout_cost.h"
#include "tessera/plan/system.h"
#include "tessera/train/train_config.h"

namespace tessera::bridge {

// A `tessera train --config` file's run as the planner and the tuner see
// it: `c` as read with train's defaults, its vocabulary from vocab_size_flag
// (the file's vocab-size; 0: none), else from the run's data as train opens
// it; validated. Throws naming the file `path`.
TrainConfig planned_run(TrainConfig c, int64_t vocab_size_flag, const std::string& path);

// The layout of a `tessera train` run as the planner prices it: the engine
// (fp32 state, its own activation arena, blockwise attention), in fp32 or
// mixed 16-bit GEMMs (--bf16 / --fp16).
plan::PlanLayout layout_of_run(const TrainConfig& c);
// The inverse for the settings a layout holds: degrees, batch, schedule,
// precision switches, overlap switches (the rest at train's defaults).
TrainConfig run_of_layout(const plan::PlanLayout& L);

// One `tessera train` setting: its key (the flag without "--") and value.
struct TrainKey {
  enum class Kind { Integer, Flag, String, Toml };  // Toml: text already in TOML form
  std::string key;
  Kind kind = Kind::Integer;
  std::string value;  // Flag: "true" / "false"; String: unquoted; Toml: as written in TOML
  std::string flag_value;  // Toml only: the value as a command-line argument
};
using TrainKeys = std::vector<TrainKey>;

// The model's shape (model_fields() on kSurfaceLayout: the sizes that
// differ from the defaults, the Llama switches that differ from GPT-2) and
// a layout (degrees, batch, ZeRO, recompute, sequence parallelism,
// schedule, overlap switches: the fields of parallel_fields() and
// run_fields() on kSurfaceLayout), each in table order, as train keys;
// whether a key is one layout_keys sets.
TrainKeys model_keys(const GPTConfig& m);
TrainKeys layout_keys(const plan::PlanLayout& L);
bool is_layout_key(const std::string& key);
// A train --config file's settings except the layout's (lr, data-path, ...),
// in key order (toml++ keeps a table sorted).
TrainKeys non_layout_keys_of_file(const std::string& path);

// "  HEAD WORD WORD ..." wrapped to lines of at most 100 columns (a word
// wider than a line still gets one), " \\" at each break, continuation lines
// indented by 4; ends in a newline. `words` are shell words, quoted already.
std::string wrapped_command(const std::string& head, const std::vector<std::string>& words);
// `tessera train --a 1 --b 2 ...` wrapped to lines of at most 100 columns.
std::string train_command(const TrainKeys& keys);
// A command-line word, quoted for a POSIX shell when it needs it.
std::string shell_word(const std::string& s);
// A TOML file for `tessera train --config`, `header` as leading comments.
std::string train_config_toml(const TrainKeys& keys, const std::string& header);

}  // namespace tessera::bridge
