// Field: one configuration setting declared once — its flag (which is also
// its --config TOML key and its key in a planned layout), its key in JSON
// files, the member it reads and writes, its accepted range and its help.
// Tables of these (parallel_fields.h, model_fields.h) are what the CLI
// options, --config files, checkpoint metadata, tune trials and printed
// `tessera train` commands are generated from, so a flag is spelled in one
// place and every surface agrees on it.
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera {

// Where a field appears besides its flag. (Every field with a flag is a
// command-line option and, by the same name, a --config TOML key, unless it
// is kOptionElsewhere.)
enum FieldSurface : unsigned {
  kSurfaceLayout = 1u << 0,      // a planned layout as train keys (plan's commands, tune's trials)
  kSurfaceCheckpoint = 1u << 1,  // a checkpoint's metadata.json
  kSurfaceTrial = 1u << 2,       // a line of tune's trial log
  kSurfaceShape = 1u << 3,       // the model's shape, which --use-checkpoint-args takes from --load
  // Its flag is added by hand, not bound to the member: --vocab-size is the
  // launch's (the data decides the vocabulary, the flag only asks for one).
  kOptionElsewhere = 1u << 4,
};

// A flag without its "--": its TOML key (and another file's key for the
// same setting).
constexpr const char* flag_key(const char* flag) { return flag + 2; }

// An integer's accepted values, [min, max]; `words` ends the sentence
// "FLAG must be ..." ("0, 1, 2 or 3", ">= 1").
struct FieldRange {
  int64_t min = 0, max = 0;
  const char* words = "";
  bool contains(int64_t v) const { return v >= min && v <= max; }
};

// An enumeration, written as one of a few names. Either `set` throws naming
// the flag for any other name (recompute_name / recompute_parse), or `names`
// lists them and set_choice refuses any other before `set` sees it.
template <class C>
struct ChoiceAccess {
  const char* (*get)(const C&);
  void (*set)(C&, std::string_view);
  std::span<const char* const> names = {};
};

// A switch with no member of its own: it says what other fields hold
// (--group-query-attention: num-query-groups > 0), and giving it changes
// nothing by itself (the flag's companion is checked where both are read).
template <class C>
struct DerivedSwitch {
  bool (*on)(const C&);
};

// The member a field reads and writes. A std::optional<int64_t> is unset
// until given (no default value, nothing written while unset).
template <class C>
using FieldAccess =
    std::variant<int64_t C::*, int C::*, bool C::*, float C::*, double C::*, std::string C::*,
                 std::optional<int64_t> C::*, ChoiceAccess<C>, DerivedSwitch<C>>;

template <class C>
struct Field {
  const char* flag;      // "--" and the flag's name; nullptr: no flag (a derived value)
  const char* json_key;  // "tp": its key in JSON files; nullptr: none
  unsigned surfaces;     // FieldSurface bits
  FieldAccess<C> access;
  const char* help;
  std::optional<FieldRange> range = std::nullopt;  // integers only
  // A planned layout writes the field only where this holds (nullptr:
  // always; an unset optional is never written).
  bool (*written)(const C&) = nullptr;
  // A JSON file holds the field only where this holds (nullptr: always);
  // the model's Llama switches are left out at GPT-2's values, so a GPT
  // checkpoint reads as it did before they existed.
  bool (*stored)(const C&) = nullptr;
  // The integer a JSON file holds instead of the member: a default spelled
  // out (the MLP width 0 stored as 4 x hidden).
  int64_t (*stored_value)(const C&) = nullptr;
  // JSON: an integer every file holds (a model's sizes); absent, reading
  // fails with "missing integer 'KEY'".
  bool required = false;
  // A switch that says the member's opposite (--disable-bias-linear clears
  // add_bias_linear); JSON files hold the member itself.
  bool negated = false;
  // --help shows no default (num-query-groups' 0 means "not given").
  bool hide_default = false;

  bool on(FieldSurface s) const { return (surfaces & s) != 0; }
  // The flag without its "--": the TOML key and the layout key.
  const char* key() const { return flag_key(flag); }
};

// Throws "FLAG must be WORDS (got V)" for a value outside the field's range.
template <class C>
void check_field_range(const Field<C>& f, int64_t v) {
  if (f.range && !f.range->contains(v)) fail("{} must be {} (got {})", f.flag, f.range->words, v);
}

// The field whose flag is `flag` (with its "--"), or nullptr.
template <class C>
const Field<C>* find_field(std::span<const Field<C>> fields, std::string_view flag) {
  for (const Field<C>& f : fields)
    if (f.flag && f.flag == flag) return &f;
  return nullptr;
}

// The field of `flag`, which must be one of the table's (`type`: the
// struct's name, for the error).
template <class C>
const Field<C>& field_of(std::span<const Field<C>> fields, std::string_view flag,
                         const char* type) {
  const Field<C>* f = find_field(fields, flag);
  TESSERA_CHECK(f != nullptr, "{} is not a field of {}", flag, type);
  return *f;
}

// "A, B or C": the names of a choice, as the end of "FLAG must be ...".
inline std::string choice_words(std::span<const char* const> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  return out;
}

// Sets a choice from its name; with `names`, any other name throws "WHO must
// be A or B (got 'V')" (who: "--flag", or a file's "what: 'key'").
template <class C>
void set_choice(const ChoiceAccess<C>& a, C& c, std::string_view v, std::string_view who) {
  if (!a.names.empty()) {
    bool known = false;
    for (const char* n : a.names) known = known || v == n;
    if (!known) fail("{} must be {} (got '{}')", who, choice_words(a.names), v);
  }
  a.set(c, v);
}

// The field's value as a flag argument and TOML text: digits, "true" /
// "false" (a negated switch's: the flag's, not the member's), the shortest
// float that reads back the same, a string itself, an enum's name;
// std::nullopt for an unset optional.
template <class C>
std::optional<std::string> field_text(const Field<C>& f, const C& c) {
  struct Text {
    const C& c;
    bool negated;  // Field::negated
    std::optional<std::string> operator()(int64_t C::*m) const { return std::to_string(c.*m); }
    std::optional<std::string> operator()(int C::*m) const { return std::to_string(c.*m); }
    std::optional<std::string> operator()(bool C::*m) const {
      return c.*m != negated ? "true" : "false";
    }
    std::optional<std::string> operator()(float C::*m) const { return fmt::format("{}", c.*m); }
    std::optional<std::string> operator()(double C::*m) const { return fmt::format("{}", c.*m); }
    std::optional<std::string> operator()(std::string C::*m) const { return c.*m; }
    std::optional<std::string> operator()(std::optional<int64_t> C::*m) const {
      if (!(c.*m)) return std::nullopt;
      return std::to_string(*(c.*m));
    }
    std::optional<std::string> operator()(const ChoiceAccess<C>& a) const { return a.get(c); }
    std::optional<std::string> operator()(const DerivedSwitch<C>& s) const {
      return s.on(c) ? "true" : "false";
    }
  };
  return std::visit(Text{c, f.negated}, f.access);
}

// Whether the field is a switch (a flag that takes no value: present or absent).
template <class C>
bool field_is_switch(const Field<C>& f) {
  return std::holds_alternative<bool C::*>(f.access) ||
         std::holds_alternative<DerivedSwitch<C>>(f.access);
}

// Sets the field from its text (field_text's forms); false when the text is
// not a whole value of the field's type (an enum's own parser throws,
// naming the flag, for a name it does not know).
template <class C>
bool field_from_text(const Field<C>& f, C& c, std::string_view text) {
  auto whole = [&](auto& v) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size();
  };
  struct Set {
    C& c;
    std::string_view text;
    decltype(whole)& parse;
    const Field<C>& f;
    bool operator()(int64_t C::*m) const { return parse(c.*m); }
    bool operator()(int C::*m) const { return parse(c.*m); }
    bool operator()(float C::*m) const { return parse(c.*m); }
    bool operator()(double C::*m) const { return parse(c.*m); }
    bool operator()(std::string C::*m) const {
      c.*m = text;
      return true;
    }
    bool operator()(std::optional<int64_t> C::*m) const {
      int64_t v = 0;
      if (!parse(v)) return false;
      c.*m = v;
      return true;
    }
    bool operator()(bool C::*m) const {
      if (text != "true" && text != "false") return false;
      c.*m = (text == "true") != f.negated;
      return true;
    }
    bool operator()(const ChoiceAccess<C>& a) const {
      set_choice(a, c, text, f.flag);
      return true;
    }
    bool operator()(const DerivedSwitch<C>&) const { return text == "true" || text == "false"; }
  };
  return std::visit(Set{c, text, whole, f}, f.access);
}

}  // namespace tessera
