#include "tessera/cli/config_file.h"

#include <toml++/toml.h>


#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"
#include "tessera/core/regular_file.h"

namespace tessera::cli {

namespace {

// The type name that marks the TOML --config (add_config_file_option).
constexpr const char* kTomlType = "TOML";

bool takes_toml_config(const CLI::App* sub) {
  const CLI::Option* opt = sub ? sub->get_option_no_throw("--config") : nullptr;
  return opt && opt->get_type_name() == kTomlType;
}

// TOML value -> the flag's argument text.
std::string value_text(const toml::node& v, const std::string& file, const std::string& key) {
  if (auto s = v.as_string()) return s->get();
  if (auto i = v.as_integer()) return std::to_string(i->get());
  if (auto f = v.as_floating_point()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", f->get());
    return buf;
  }
  if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
  fail("config {}: key '{}' must be a string, number or boolean", file, key);
}

void append_file_flags(const std::string& file, const CLI::App* sub,
                       std::vector<std::string>& out) {
  toml::table table;
  try {
    const std::string text = read_toml_text(file, "--config");
    table = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    fail("config {}: {} (line {}, column {})", file, e.description(), where.line, where.column);
  }
  for (const auto& [k, v] : table) {
    std::string key(k.str());
    const CLI::Option* opt = sub->get_option_no_throw("--" + key);
    TESSERA_CHECK(opt && key != "config", "config {}: unknown key '{}' (`tessera {}` has no --{})",
                  file, clipped(key), sub->get_name(), clipped(key));
    std::string text = value_text(v, file, key);
    // A flag (present or absent): it takes no argument. (Its type size is 1
    // for a bool flag in CLI11 2.x, so that is not the test.)
    if (opt->get_expected_max() == 0) {
      TESSERA_CHECK(v.is_boolean(), "config {}: key '{}' is a flag and takes true or false", file,
                    key);
      if (text == "true") out.push_back("--" + key);
      continue;
    }
    out.push_back("--" + key);
    out.push_back(text);
  }
}

}  // namespace

CLI::Option* add_config_file_option(CLI::App* sub) {
  return sub
      ->add_option("--config",
                   "TOML file of these options: key = long flag name, e.g. num-layers = 6")
      ->type_name(kTomlType);
}

std::vector<std::string> expand_config_files(int argc, char** argv, const CLI::App& app) {
  std::vector<std::string> out;
  const CLI::App* sub = nullptr;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (!sub && i > 0) {
      for (const CLI::App* s : app.get_subcommands({}))
        if (s->get_name() == a) sub = s;
    }
    std::string file;
    if (sub && sub->get_option_no_throw("--config") && !takes_toml_config(sub)) {
      out.push_back(a);  // this subcommand's own --config: CLI11 parses it
      continue;
    }
    if (a == "--config" && i + 1 < argc) {
      file = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      file = a.substr(9);
    } else {
      out.push_back(a);
      continue;
    }
    TESSERA_CHECK(takes_toml_config(sub),
                  "--config is only accepted after a subcommand that takes it (e.g. tessera train "
                  "--config FILE)");
    require_regular_file(file, "--config");  // a named pipe would block the read forever
    // The file's flags go first so later command-line flags win.
    std::vector<std::string> flags;
    append_file_flags(file, sub, flags);
    size_t sub_end = 0;  // position right after the subcommand's name
    for (size_t j = 1; j < out.size(); ++j)
      if (out[j] == sub->get_name()) {
        sub_end = j + 1;
        break;
      }
    out.insert(out.begin() + long(sub_end), flags.begin(), flags.end());
  }
  return out;
}

}  // namespace tessera::cli
