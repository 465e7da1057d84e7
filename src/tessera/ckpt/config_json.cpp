#include "tessera/ckpt/config_json.h"

#include <fmt/format.h>

#include "tessera/core/error.h"

namespace tessera::ckpt {

using nlohmann::json;

namespace {

int64_t need_int(const json& j, const char* key) {
  TESSERA_CHECK(j.contains(key) && j[key].is_number_integer(), "model config: missing integer '{}'",
                key);
  return j[key].get<int64_t>();
}


}  // namespace

json model_to_json(const GPTConfig& m) {
  return {{"num_layers", m.num_layers},
          {"hidden_size", m.hidden_size},
          {"num_heads", m.num_heads},
          {"seq_length", m.seq_length},
          {"max_position_embeddings", m.positions()},
          {"vocab_size", m.vocab_size},
          {"ffn_hidden_size", m.ffn()},
          {"make_vocab_size_divisible_by", m.make_vocab_size_divisible_by},
          {"init_std", m.init_std},
          {"attention_dropout", m.attention_dropout},
          {"hidden_dropout", m.hidden_dropout}};
}

GPTConfig model_from_json(const json& j) {
  GPTConfig m;
  m.num_layers = need_int(j, "num_layers");
  m.hidden_size = need_int(j, "hidden_size");
  m.num_heads = need_int(j, "num_heads");
  m.seq_length = need_int(j, "seq_length");
  if (j.contains("max_position_embeddings"))
    m.max_position_embeddings = need_int(j, "max_position_embeddings");
  m.vocab_size = need_int(j, "vocab_size");
  m.ffn_hidden_size = j.value("ffn_hidden_size", int64_t(0));
  if (m.ffn_hidden_size == 4 * m.hidden_size) m.ffn_hidden_size = 0;  // the default, spelled out
  m.make_vocab_size_divisible_by = j.value("make_vocab_size_divisible_by", int64_t(128));
  m.init_std = j.value("init_std", 0.02f);
  m.attention_dropout = j.value("attention_dropout", 0.0f);  // absent: written before dropout existed
  m.hidden_dropout = j.value("hidden_dropout", 0.0f);
  m.validate();
  return m;
}

json parallel_to_json(const ParallelConfig& p) {
  return {{"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"virtual_stages", p.virtual_stages},
          {"schedule", schedule_kind_name(p.schedule)},
          {"micro_batch", p.micro_batch},
          {"global_batch", p.global_batch},
          {"zero_stage", p.zero_stage},
          {"recompute", recompute_name(p.recompute)},
          {"sequence_parallel", p.sequence_parallel}};
}

ParallelConfig parallel_from_json(const json& j) {
  ParallelConfig p;
  p.tp = j.value("tp", int64_t(1));
  p.pp = j.value("pp", int64_t(1));
  p.dp = j.value("dp", int64_t(1));
  p.virtual_stages = j.value("virtual_stages", int64_t(1));
  // Files written before the schedule was part of ParallelConfig ran 1F1B.
  p.schedule = schedule_kind_parse(j.value("schedule", std::string("1f1b")));
  p.micro_batch = j.value("micro_batch", int64_t(1));
  p.global_batch = j.value("global_batch", int64_t(1));
  p.zero_stage = j.value("zero_stage", 0);
  std::string r = j.value("recompute", std::string("none"));
  p.recompute = r == "full" ? Recompute::Full : r == "selective" ? Recompute::Selective : Recompute::None;
  p.sequence_parallel = j.value("sequence_parallel", false);
  return p;
}

std::string model_difference(const GPTConfig& a, const GPTConfig& b) {
  auto diff = [](const char* what, int64_t x, int64_t y) {
    return x == y ? std::string() : fmt::format("{} {} vs {}", what, x, y);
  };
  for (std::string d : {diff("num_layers", a.num_layers, b.num_layers),
                        diff("hidden_size", a.hidden_size, b.hidden_size),
                        diff("num_heads", a.num_heads, b.num_heads),
                        diff("seq_length", a.seq_length, b.seq_length),
                        diff("max_position_embeddings", a.positions(), b.positions()),
                        diff("vocab_size", a.vocab_size, b.vocab_size),
                        diff("ffn_hidden_size", a.ffn(), b.ffn())})
    if (!d.empty()) return d;
  return "";
}

}  // namespace tessera::ckpt
