// A table of fields (field.h) as a JSON object: each field on a surface
// under its json_key, typed (integers, booleans, enum names). Checkpoint
// metadata and tune's trial log are written and read through these, so the
// two agree with each other and with the flags.
#pragma once
#include <span>

#include <nlohmann/json.hpp>

#include "tessera/config/field.h"

namespace tessera {

// How a file spells what it does not hold.
struct JsonForm {
  // Reading: a key that is absent is an error (a trial line has every key)
  // instead of the field's default (metadata written before the field
  // existed reads as the default).
  bool every_key_required = false;
  // An unset optional is written as 0 (and 0 read as unset) instead of
  // being left out; optionals are never required.
  bool unset_as_zero = false;
  // Reading checks each integer against its field's range.
  bool check_ranges = false;
};

template <class C>
void fields_to_json(std::span<const Field<C>> fields, FieldSurface surface, const C& c,
                    const JsonForm& form, nlohmann::json& j) {
  for (const Field<C>& f : fields) {
    if (!f.on(surface)) continue;
    struct Write {
      const C& c;
      const JsonForm& form;
      nlohmann::json& out;
      void operator()(int64_t C::*m) const { out = c.*m; }
      void operator()(int C::*m) const { out = c.*m; }
      void operator()(bool C::*m) const { out = c.*m; }
      void operator()(float C::*m) const { out = c.*m; }
      void operator()(double C::*m) const { out = c.*m; }
      void operator()(std::string C::*m) const { out = c.*m; }
      void operator()(std::optional<int64_t> C::*m) const { out = (c.*m).value_or(0); }
      void operator()(const ChoiceAccess<C>& a) const { out = a.get(c); }
      void operator()(const DerivedSwitch<C>& s) const { out = s.on(c); }
    };
    const auto* optional = std::get_if<std::optional<int64_t> C::*>(&f.access);
    if (optional && !(c.**optional) && !form.unset_as_zero) continue;
    if (f.stored && !f.stored(c)) continue;
    if (f.stored_value) {
      j[f.json_key] = f.stored_value(c);
      continue;
    }
    std::visit(Write{c, form, j[f.json_key]}, f.access);
  }
}

// Fills c's fields on `surface` from j; throws tessera::Error "WHAT: ..."
// naming the key of a missing or mistyped value.
template <class C>
void fields_from_json(std::span<const Field<C>> fields, FieldSurface surface,
                      const nlohmann::json& j, const JsonForm& form, const char* what, C& c) {
  TESSERA_CHECK(j.is_object(), "{} is not an object (got {})", what, j.dump());
  for (const Field<C>& f : fields) {
    if (!f.on(surface)) continue;
    const char* key = f.json_key;
    const bool optional = std::holds_alternative<std::optional<int64_t> C::*>(f.access);
    if (f.required)
      TESSERA_CHECK(j.contains(key) && j[key].is_number_integer(), "{}: missing integer '{}'",
                    what, key);
    if (!j.contains(key)) {
      TESSERA_CHECK(optional || !form.every_key_required, "{}: missing '{}'", what, key);
      continue;
    }
    const nlohmann::json& v = j[key];
    auto read_integer = [&] {
      TESSERA_CHECK(v.is_number_integer(), "{}: '{}' must be an integer (got {})", what, key,
                    v.dump());
      const int64_t x = v.get<int64_t>();
      if (form.check_ranges && f.range && !f.range->contains(x))
        fail("{}: '{}' must be {} (got {})", what, key, f.range->words, x);
      return x;
    };
    struct Read {
      const nlohmann::json& v;
      const JsonForm& form;
      const char* what;
      const char* key;
      decltype(read_integer)& integer;
      C& c;
      void operator()(int64_t C::*m) const { c.*m = integer(); }
      void operator()(int C::*m) const { c.*m = int(integer()); }
      void operator()(bool C::*m) const {
        TESSERA_CHECK(v.is_boolean(), "{}: '{}' must be true or false (got {})", what, key,
                      v.dump());
        c.*m = v.get<bool>();
      }
      void number() const {
        TESSERA_CHECK(v.is_number(), "{}: '{}' must be a number (got {})", what, key, v.dump());
      }
      void operator()(float C::*m) const {
        number();
        c.*m = v.get<float>();
      }
      void operator()(double C::*m) const {
        number();
        c.*m = v.get<double>();
      }
      void operator()(std::string C::*m) const {
        TESSERA_CHECK(v.is_string(), "{}: '{}' must be a string (got {})", what, key, v.dump());
        c.*m = v.get<std::string>();
      }
      void operator()(std::optional<int64_t> C::*m) const {
        const int64_t x = integer();
        if (x != 0 || !form.unset_as_zero) c.*m = x;
      }
      void operator()(const ChoiceAccess<C>& a) const {
        TESSERA_CHECK(v.is_string(), "{}: '{}' must be a string (got {})", what, key, v.dump());
        set_choice(a, c, v.get<std::string>(), fmt::format("{}: '{}'", what, key));
      }
      // Nothing of its own to set: the fields it derives from are read.
      void operator()(const DerivedSwitch<C>&) const {
        TESSERA_CHECK(v.is_boolean(), "{}: '{}' must be true or false (got {})", what, key,
                      v.dump());
      }
    };
    std::visit(Read{v, form, what, key, read_integer, c}, f.access);
  }
}

}  // namespace tessera
