#include "tessera/bridge/run_plan.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

#include "tessera/config/model_fields.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"
#include "tessera/train/data_setup.h"
#include "tessera/train/run_fields.h"

namespace tessera::bridge {

namespace {

// A float's text (field_text: the shortest that reads back the same value)
// with a '.' or an exponent in TOML, where 500000 alone would be an integer.
TrainKey number(const std::string& key, const std::string& text) {
  const bool has_point = text.find_first_of(".eEn") != std::string::npos;
  return {key, TrainKey::Kind::Toml, has_point ? text : text + ".0", text};
}

// A field's value as a train key, typed as TOML wants it; nothing for an
// unset optional or a field the layout leaves out (Field::written).
template <class C>
void append_field_key(const Field<C>& f, const C& c, TrainKeys& out) {
  if (f.written && !f.written(c)) return;
  const std::optional<std::string> text = field_text(f, c);
  if (!text) return;
  const std::string key(f.key());
  struct Kind {
    const std::string& key;
    const std::string& text;
    TrainKey operator()(bool C::*) const { return {key, TrainKey::Kind::Flag, text, ""}; }
    TrainKey operator()(const DerivedSwitch<C>&) const {
      return {key, TrainKey::Kind::Flag, text, ""};
    }
    TrainKey string() const { return {key, TrainKey::Kind::String, text, ""}; }
    TrainKey operator()(const ChoiceAccess<C>&) const { return string(); }
    TrainKey operator()(std::string C::*) const { return string(); }
    TrainKey operator()(float C::*) const { return number(key, text); }
    TrainKey operator()(double C::*) const { return number(key, text); }
    TrainKey integer() const { return {key, TrainKey::Kind::Integer, text, ""}; }
    TrainKey operator()(int64_t C::*) const { return integer(); }
    TrainKey operator()(int C::*) const { return integer(); }
    TrainKey operator()(std::optional<int64_t> C::*) const { return integer(); }
  };
  out.push_back(std::visit(Kind{key, *text}, f.access));
}

template <class C>
void append_layout_keys(std::span<const Field<C>> fields, const C& c, TrainKeys& out) {
  for (const Field<C>& f : fields)
    if (f.on(kSurfaceLayout)) append_field_key(f, c, out);
}

// A TOML basic string: quotes and backslashes escaped (control characters
// do not occur in flag values).
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace

TrainConfig planned_run(TrainConfig c, int64_t vocab_flag, const std::string& path) {
  if (vocab_flag > 0) {
    c.model.vocab_size = vocab_flag;
  } else {
    // No vocab-size: the vocabulary is the data's, as `tessera train` finds
    // it (the embedded corpus's tokenizer when the file names no data).
    try {
      c.model.vocab_size = open_training_data(c, 0).vocab_size;
    } catch (const Error& e) {
      fail("--config {}: no vocab-size, and the run's data gives none: {}", path, e.what());
    }
  }
  try {
    c.model.validate();
  } catch (const Error& e) {
    fail("--config {}: {}", path, e.what());
  }
  return c;
}

plan::PlanLayout layout_of_run(const TrainConfig& c) {
  // run_of_layout is the inverse for the fields a layout holds.
  plan::PlanLayout L;
  L.par = c.par;
  L.precision = c.precision();
  L.engine = true;
  L.flash_attention = true;  // blockwise attention: the score matrices are never stored
  L.overlap_grad_reduce = c.overlap_grad_reduce;
  L.overlap_param_gather = c.overlap_param_gather;
  return L;
}

TrainKeys model_keys(const GPTConfig& m) {
  TrainKeys k;
  append_layout_keys(model_fields(), m, k);
  return k;
}

TrainConfig run_of_layout(const plan::PlanLayout& L) {
  TrainConfig c;
  c.par = L.par;
  c.bf16 = L.precision == Precision::Bf16;
  c.fp16 = L.precision == Precision::Fp16;
  c.overlap_grad_reduce = L.overlap_grad_reduce;
  c.overlap_param_gather = L.overlap_param_gather;
  return c;
}

TrainKeys layout_keys(const plan::PlanLayout& L) {
  TrainKeys k;
  append_layout_keys(parallel_fields(), L.par, k);
  append_layout_keys(run_fields(), run_of_layout(L), k);
  return k;
}

bool is_layout_key(const std::string& key) {
  auto in = [&](const auto& fields) {
    return std::any_of(fields.begin(), fields.end(), [&](const auto& f) {
      return f.on(kSurfaceLayout) && f.key() == key;
    });
  };
  // num-layers-per-virtual-pipeline-stage sets virtual-pipeline-stages, so
  // a planned layout replaces it too.
  return in(parallel_fields()) || in(run_fields()) || key == flag_key(flag::layers_per_virtual_stage);
}

TrainKeys non_layout_keys_of_file(const std::string& path) {
  toml::table table;
  try {
    const std::string text = read_toml_text(path, "--config");
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail("config {}: {} (line {})", path, e.description(), e.source().begin.line);
  }
  TrainKeys out;
  for (const auto& [k, v] : table) {
    const std::string key(k.str());
    if (is_layout_key(key)) continue;
    // The kinds `tessera train --config` accepts (config_file.cpp); it has
    // already read this file, so nothing else occurs.
    TrainKey t{key, TrainKey::Kind::Toml, "", ""};
    if (auto s = v.as_string()) {
      t.kind = TrainKey::Kind::String, t.value = s->get();
    } else if (auto b = v.as_boolean()) {
      t.kind = TrainKey::Kind::Flag, t.value = b->get() ? "true" : "false";
    } else if (auto i = v.as_integer()) {
      t.kind = TrainKey::Kind::Integer, t.value = std::to_string(i->get());
    } else if (auto f = v.as_floating_point()) {
      // The shortest text that reads back the same double (or inf / nan).
      t = number(key, fmt::format("{}", f->get()));
    } else {
      fail("config {}: key '{}' must be a string, number or boolean", path, key);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string_view("-_./,:=+@%").find(ch) !=
                                                               std::string_view::npos;
  });
  if (plain) return s;
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string wrapped_command(const std::string& head, const std::vector<std::string>& words) {
  std::string out = "  " + head, line = out;
  for (const std::string& w : words) {
    if (line.size() + 1 + w.size() + 2 > 100) {
      out += " \\\n   ";
      line = "   ";
    }
    out += " " + w;
    line += " " + w;
  }
  return out + "\n";
}

std::string train_command(const TrainKeys& keys) {
  std::vector<std::string> words;
  for (const TrainKey& k : keys) {
    if (k.kind == TrainKey::Kind::Flag) {
      if (k.value == "true") words.push_back("--" + k.key);
      continue;
    }
    const std::string& v = k.kind == TrainKey::Kind::Toml ? k.flag_value : k.value;
    words.push_back("--" + k.key + " " + shell_word(v));
  }
  return wrapped_command("tessera train", words);
}

std::string train_config_toml(const TrainKeys& keys, const std::string& header) {
  std::string out;
  std::istringstream lines(header);
  for (std::string l; std::getline(lines, l);) out += "# " + l + "\n";
  for (const TrainKey& k : keys) {
    std::string v = k.value;
    if (k.kind == TrainKey::Kind::String) v = toml_string(k.value);
    out += fmt::format("{} = {}\n", k.key, v);
  }
  return out;
}

}  // namespace tessera::bridge
