// Command-line options generated from a table of fields (config/field.h):
// one CLI11 option per field with a flag, bound to the field's member of
// `c`, with the field's help. The same table is --config's keys (config_file.h
// expands a file into these options) and a planned layout's train keys.
#pragma once
#include <span>
#include <string>

#include <CLI/CLI.hpp>

#include "tessera/config/field.h"

namespace tessera::cli {

template <class C>
void add_field_options(CLI::App* sub, std::span<const Field<C>> fields, C& c) {
  for (const Field<C>& f : fields) {
    if (!f.flag) continue;
    struct Add {
      CLI::App* sub;
      const Field<C>& f;
      C& c;
      // Numbers show their default in --help; a flag is present or absent.
      void operator()(int64_t C::*m) const {
        sub->add_option(f.flag, c.*m, f.help)->capture_default_str();
      }
      void operator()(int C::*m) const {
        sub->add_option(f.flag, c.*m, f.help)->capture_default_str();
      }
      void operator()(float C::*m) const {
        sub->add_option(f.flag, c.*m, f.help)->capture_default_str();
      }
      void operator()(bool C::*m) const { sub->add_flag(f.flag, c.*m, f.help); }
      // Unset (no default) until given.
      void operator()(std::optional<int64_t> C::*m) const {
        C* target = &c;
        sub->add_option_function<int64_t>(
            f.flag, [target, m](int64_t v) { target->*m = v; }, f.help);
      }
      // An enum: its name, checked by the field's own parser.
      void operator()(const ChoiceAccess<C>& a) const {
        C* target = &c;
        const auto set = a.set;
        sub->add_option_function<std::string>(
               f.flag, [target, set](const std::string& v) { set(*target, v); }, f.help)
            ->default_str(a.get(c));
      }
    };
    std::visit(Add{sub, f, c}, f.access);
  }
}

}  // namespace tessera::cli
