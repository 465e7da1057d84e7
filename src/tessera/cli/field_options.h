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
    if (!f.flag || f.on(kOptionElsewhere)) continue;
    struct Add {
      CLI::App* sub;
      const Field<C>& f;
      C& c;
      // Numbers show their default in --help (unless hide_default); a flag
      // is present or absent.
      void number(CLI::Option* o) const {
        if (!f.hide_default) o->capture_default_str();
      }
      void operator()(int64_t C::*m) const { number(sub->add_option(f.flag, c.*m, f.help)); }
      void operator()(int C::*m) const { number(sub->add_option(f.flag, c.*m, f.help)); }
      void operator()(float C::*m) const { number(sub->add_option(f.flag, c.*m, f.help)); }
      void operator()(double C::*m) const { number(sub->add_option(f.flag, c.*m, f.help)); }
      // A path or name: empty until given, so no default to show.
      void operator()(std::string C::*m) const { sub->add_option(f.flag, c.*m, f.help); }
      void operator()(bool C::*m) const {
        if (!f.negated) {
          sub->add_flag(f.flag, c.*m, f.help);
          return;
        }
        C* target = &c;
        sub->add_flag_callback(f.flag, [target, m] { target->*m = false; }, f.help);
      }
      void operator()(const DerivedSwitch<C>&) const {
        const std::string help = f.help;
        sub->add_flag(f.flag, help);
      }
      // Unset (no default) until given.
      void operator()(std::optional<int64_t> C::*m) const {
        C* target = &c;
        sub->add_option_function<int64_t>(
            f.flag, [target, m](int64_t v) { target->*m = v; }, f.help);
      }
      // An enum: its name, checked by the field's own parser.
      void operator()(const ChoiceAccess<C>& a) const {
        C* target = &c;
        const ChoiceAccess<C> access = a;
        const char* flag = f.flag;
        sub->add_option_function<std::string>(
               f.flag,
               [target, access, flag](const std::string& v) { set_choice(access, *target, v, flag); },
               f.help)
            ->default_str(a.get(c));
      }
    };
    std::visit(Add{sub, f, c}, f.access);
  }
}

}  // namespace tessera::cli
