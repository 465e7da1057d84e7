#include "tessera/plan/study_data.h"

#include <toml++/toml.h>

#include <filesystem>

#include "tessera/core/error.h"
#include "tessera/core/toml_text.h"
#include "tessera/plan/system.h"

namespace tessera::plan {

namespace {

// One table of the study file and where it is, for the error messages.
struct Reader {
  const toml::table& t;
  std::string where;  // "file [section]"

  double number(const char* key) const {
    auto v = t[key].value<double>();
    TESSERA_CHECK(v.has_value(), "{}: missing or non-numeric '{}'", where, key);
    return *v;
  }
  int64_t integer(const char* key) const {
    auto v = t[key].value<int64_t>();
    TESSERA_CHECK(v.has_value(), "{}: missing or non-integer '{}'", where, key);
    return *v;
  }
  std::string text(const char* key) const {
    auto v = t[key].value<std::string>();
    TESSERA_CHECK(v.has_value(), "{}: missing string '{}'", where, key);
    return *v;
  }
};

PublishedRun read_run(const Reader& r) {
  return {r.text("model"), r.integer("tp"), r.integer("pp"), r.integer("dp"),
          r.integer("global_batch"), r.t.contains("percent_of_peak") ? r.number("percent_of_peak") : 0};
}

ScalingSeries read_series(const Reader& r) {
  ScalingSeries s{r.text("model"), r.integer("tp"), r.integer("pp"), {}, r.integer("batch"),
                  r.t["weak"].value<bool>().value_or(true), r.number("study_efficiency")};
  const toml::array* dps = r.t["dps"].as_array();
  TESSERA_CHECK(dps && !dps->empty(), "{}: 'dps' must be a list of data-parallel sizes", r.where);
  for (const auto& d : *dps) {
    auto v = d.value<int64_t>();
    TESSERA_CHECK(v && *v >= 1, "{}: 'dps' entries must be integers >= 1", r.where);
    s.dps.push_back(*v);
  }
  return s;
}

// Each table of the array `key` of `root`, read by `read`.
template <typename Read>
auto read_list(const toml::table& root, const char* key, const std::string& file, Read read) {
  const toml::array* list = root[key].as_array();
  TESSERA_CHECK(list && !list->empty(), "{}: missing [[{}]]", file, key);
  std::vector<decltype(read(std::declval<Reader>()))> out;
  for (const auto& e : *list) {
    const toml::table* t = e.as_table();
    TESSERA_CHECK(t != nullptr, "{}: [[{}]] entries must be tables", file, key);
    out.push_back(read(Reader{*t, file + " [[" + key + "]]"}));
  }
  return out;
}

}  // namespace

StudyData load_study(const std::string& name) {
  const std::string file = config_dir() + "/studies/" + name + ".toml";
  TESSERA_CHECK(std::filesystem::exists(file), "--study: no such file '{}'", file);
  toml::table root;
  try {
    const std::string text = read_toml_text(file, "study");
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    fail("{}: {} (line {})", file, e.description(), e.source().begin.line);
  }
  const Reader top{root, file};
  StudyData d;
  d.peak_tflops_a = top.number("peak_tflops_a");
  d.peak_tflops_b = top.number("peak_tflops_b");
  d.published = read_list(root, "published", file, read_run);
  d.scaling = read_list(root, "scaling", file, read_series);
  const toml::table* t = root["text"].as_table();
  TESSERA_CHECK(t != nullptr, "{}: missing [text]", file);
  const Reader tr{*t, file + " [text]"};
  d.text = {tr.text("header"),         tr.text("throughput_intro"), tr.text("reading"),
            tr.text("measured_intro"), tr.text("state_row"),        tr.text("drop_row"),
            tr.text("scaling_intro"),  tr.text("scaling_outro")};
  const toml::table* ev = root["evidence"].as_table();
  TESSERA_CHECK(ev != nullptr, "{}: missing [evidence]", file);
  const Reader er{*ev, file + " [evidence]"};
  d.evidence = {er.number("gemm_best_tflops"), er.text("gemm_source")};
  const toml::table* m = root["measured"].as_table();
  TESSERA_CHECK(m != nullptr, "{}: missing [measured]", file);
  const Reader r{*m, file + " [measured]"};
  d.measured = {read_run(r),
                r.integer("gcds"),
                r.number("step_seconds"),
                r.number("resident_state_gb"),
                r.number("stage0_peak_gb"),
                r.number("drop_per_stage_gb"),
                r.number("bytes_per_param")};
  return d;
}

}  // namespace tessera::plan
