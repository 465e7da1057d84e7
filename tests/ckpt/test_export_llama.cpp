// Hugging Face Llama export/import (issue 17): names and row blocks, the
// LlamaConfig both ways and the keys this engine refuses, the export read by
// an independent PyTorch Llama (safetensors_reference.py: logits and
// loss to 1e-4) and imported back bit for bit, tied and untied, MHA, GQA and
// MQA, with and without biases; files the model cannot hold; models no
// Hugging Face architecture holds (refused on export, naming the setting).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "export_case.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/hf_gpt2.h"
#include "tessera/ckpt/hf_llama.h"
#include "tessera/ckpt/hf_model.h"
#include "tessera/ckpt/hf_qwen2.h"
#include "tessera/ckpt/safetensors.h"

namespace tessera {
namespace {

using namespace ckpt;
using nlohmann::json;
using test::Exported;
using test::ScratchDir;
using test::throws_error_with;

// tiny_llama with a padded byte vocabulary (300 -> 384 rows), a norm epsilon
// and rotary base of its own (config.json must carry them); kv: key/value
// heads (0: one per query head).
GPTConfig llama(int64_t kv, bool untied, bool bias) {
  GPTConfig m = test::tiny_llama();
  m.vocab_size = 300;
  m.num_query_groups = kv;
  m.untie_embeddings = untied;
  m.add_bias_linear = bias;
  m.norm_epsilon = 1e-6f;
  m.rotary_base = 500.0f;
  return m;
}

// Qwen2's block: Llama's without biases but on q, k and v (--add-qkv-bias).
GPTConfig qwen2(int64_t kv, bool untied) {
  GPTConfig m = llama(kv, untied, false);
  m.add_qkv_bias = true;
  return m;
}

bool same_params(GPT& a, GPT& b) {
  return a.params().nbytes() == b.params().nbytes() &&
         std::memcmp(a.params().data(), b.params().data(), a.params().nbytes()) == 0;
}

// The model config.json in dir describes, filled from dir's model.safetensors.
std::unique_ptr<GPT> import_dir(const std::string& dir, GPTConfig* cfg) {
  *cfg = model_from_hf(json::parse(read_file(dir + "/config.json")));
  auto m = std::make_unique<GPT>(*cfg, ParamLayout::build(*cfg, ParallelConfig{}, 0, 0));
  import_hf(dir + "/model.safetensors", *m);
  return m;
}

TEST(HfLlama, RowBlocksOfTheFusedTensors) {
  const GPTConfig m = test::tiny_llama();  // 4 heads of 8 over 2 kv heads, F = 64
  auto pieces = llama_hf_pieces("h.3.attn.qkv.weight", m);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].name, "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(pieces[1].name, "model.layers.3.self_attn.k_proj.weight");
  EXPECT_EQ(pieces[2].name, "model.layers.3.self_attn.v_proj.weight");
  EXPECT_EQ(pieces[0].row0, 0);
  EXPECT_EQ(pieces[0].rows, 32);
  EXPECT_EQ(pieces[1].row0, 32);
  EXPECT_EQ(pieces[1].rows, 16);
  EXPECT_EQ(pieces[2].row0, 48);
  EXPECT_EQ(pieces[2].rows, 16);
  pieces = llama_hf_pieces("h.0.mlp.fc.bias", m);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].name, "model.layers.0.mlp.gate_proj.bias");
  EXPECT_EQ(pieces[1].name, "model.layers.0.mlp.up_proj.bias");
  EXPECT_EQ(pieces[1].row0, 64);
  EXPECT_EQ(llama_hf_pieces("h.1.ln_1.weight", m)[0].name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(llama_hf_pieces("h.1.ln_2.weight", m)[0].name,
            "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(llama_hf_pieces("h.1.attn.proj.weight", m)[0].name, "model.layers.1.self_attn.o_proj.weight");
  EXPECT_EQ(llama_hf_pieces("h.1.mlp.proj.bias", m)[0].name, "model.layers.1.mlp.down_proj.bias");
  EXPECT_EQ(llama_hf_pieces("ln_f.weight", m)[0].name, "model.norm.weight");
  EXPECT_EQ(llama_hf_pieces("wte", m)[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(llama_hf_pieces("wte", m)[0].rows, 67);  // real rows, not the padded 128
  EXPECT_EQ(llama_hf_pieces("lm_head.weight", m)[0].rows, 67);
  EXPECT_THROW(llama_hf_pieces("h.0.ln_1.bias", m), Error);
  EXPECT_THROW(llama_hf_pieces("wpe", m), Error);
}

TEST(HfLlama, ConfigBothWays) {
  for (const GPTConfig& m : {llama(2, true, false), llama(0, false, true), llama(1, true, true)}) {
    const json c = llama_hf_config(m, 7);
    EXPECT_EQ(c["architectures"], json({"LlamaForCausalLM"}));
    EXPECT_EQ(c["model_type"], "llama");
    EXPECT_EQ(c["num_key_value_heads"], m.kv_heads());
    EXPECT_EQ(c["intermediate_size"], m.ffn());
    EXPECT_EQ(c["tie_word_embeddings"], !m.untie_embeddings);
    EXPECT_EQ(c["attention_bias"], m.add_bias_linear);
    EXPECT_EQ(c["mlp_bias"], m.add_bias_linear);
    EXPECT_EQ(c["rms_norm_eps"].get<double>(), 1e-6);  // the decimal, not the float's binary value
    EXPECT_EQ(c["rope_theta"].get<double>(), 500.0);
    EXPECT_EQ(c["bos_token_id"], 7);
    EXPECT_EQ(c["eos_token_id"], 7);
    EXPECT_EQ(hf_arch_of(c), HfArch::Llama);
    const GPTConfig back = model_from_hf(c);
    EXPECT_EQ(back.summary(), m.summary());
    EXPECT_EQ(back.norm_epsilon, m.norm_epsilon);
    EXPECT_EQ(back.rotary_base, m.rotary_base);
    EXPECT_EQ(back.init_std, m.init_std);
    EXPECT_EQ(back.positions(), m.positions());
  }
  // Hugging Face's defaults where keys are missing: MHA, an untied head, no biases.
  json c = llama_hf_config(llama(2, false, false));
  for (const char* k : {"num_key_value_heads", "tie_word_embeddings", "attention_bias", "mlp_bias",
                        "head_dim", "rope_scaling", "hidden_act", "model_type"})
    c.erase(k);
  const GPTConfig d = model_from_hf(c);  // architectures alone says Llama
  EXPECT_EQ(d.num_query_groups, 0);
  EXPECT_TRUE(d.untie_embeddings);
  EXPECT_FALSE(d.add_bias_linear);
  // Newer transformers' way of saying "no scaling" is plain rope too.
  c["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(model_from_hf(c).summary(), d.summary());
  EXPECT_EQ(hf_arch_of(hf_config(test::tiny_gpt())), HfArch::Gpt2);
}

TEST(HfQwen2, ConfigBothWaysAndItsRefusals) {
  const GPTConfig m = qwen2(2, false);
  EXPECT_EQ(hf_arch_of(m), HfArch::Qwen2);
  const json c = qwen2_hf_config(m, 7);
  EXPECT_EQ(c["architectures"], json({"Qwen2ForCausalLM"}));
  EXPECT_EQ(c["model_type"], "qwen2");
  EXPECT_EQ(c["use_sliding_window"], false);
  for (const char* k : {"attention_bias", "mlp_bias", "head_dim"}) EXPECT_FALSE(c.contains(k)) << k;
  EXPECT_EQ(hf_arch_of(c), HfArch::Qwen2);
  const GPTConfig back = model_from_hf(c);
  EXPECT_TRUE(back.add_qkv_bias);
  EXPECT_FALSE(back.add_bias_linear);
  EXPECT_EQ(back.summary(), m.summary());
  json a = c;
  a.erase("model_type");  // architectures alone says Qwen2
  EXPECT_EQ(hf_arch_of(a), HfArch::Qwen2);
  // The q, k, v biases exist; o_proj and the MLP have none.
  const ParamLayout L = ParamLayout::build(m, ParallelConfig{}, 0, 0);
  EXPECT_TRUE(L.contains("h.0.attn.qkv.bias"));
  EXPECT_FALSE(L.contains("h.0.attn.proj.bias"));
  EXPECT_FALSE(L.contains("h.0.mlp.fc.bias"));
  json sw = c;
  sw["use_sliding_window"] = true;
  EXPECT_TRUE(throws_error_with([&] { model_from_hf(sw); }, {"use_sliding_window true"}));
  json ab = c;
  ab["attention_bias"] = true;
  EXPECT_TRUE(throws_error_with([&] { model_from_hf(ab); }, {"'attention_bias' is not a Qwen2 key"}));
  // Mixtral has no biases at all: an MoE model with the qkv bias has no architecture.
  GPTConfig moe = m;
  moe.num_experts = 4;
  moe.moe_router_topk = 2;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(moe); }, {"no --add-qkv-bias"}));
}

TEST(HfLlama, ConfigKeysThisEngineCannotComputeAreRefusedNamingTheKey) {
  const json base = llama_hf_config(llama(2, true, false));
  auto refused = [&](const char* key, const json& value, std::vector<std::string> needles) {
    json c = base;
    if (value.is_discarded())
      c.erase(key);
    else
      c[key] = value;
    needles.insert(needles.begin(), "config.json");
    return throws_error_with([&] { model_from_hf(c); }, needles);
  };
  EXPECT_TRUE(refused("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}, {"rope_scaling", "llama3"}));
  EXPECT_TRUE(refused("hidden_act", "gelu", {"hidden_act 'gelu'", "silu"}));
  EXPECT_TRUE(refused("hidden_act", 3, {"'hidden_act' has the wrong type"}));
  EXPECT_TRUE(refused("head_dim", 16, {"head_dim 16", "= 8"}));
  EXPECT_TRUE(refused("mlp_bias", true, {"attention_bias false but mlp_bias true"}));
  EXPECT_TRUE(refused("num_key_value_heads", 3, {"num_key_value_heads (3)"}));
  EXPECT_TRUE(refused("intermediate_size", json(json::value_t::discarded), {"'intermediate_size'"}));
  EXPECT_TRUE(refused("intermediate_size", 0, {"intermediate_size must be >= 1"}));
  EXPECT_TRUE(refused("rms_norm_eps", "x", {"'rms_norm_eps' has the wrong type"}));
  EXPECT_TRUE(refused("tie_word_embeddings", "yes", {"'tie_word_embeddings' has the wrong type"}));
  EXPECT_TRUE(refused("model_type", "mistral", {"model_type 'mistral'", "GPT-2", "Llama", "Qwen2"}));
  json c = base;
  c["attention_bias"] = true;
  c.erase("mlp_bias");  // transformers before 4.41: biased attention, an MLP without
  EXPECT_TRUE(throws_error_with([&] { model_from_hf(c); }, {"attention_bias true but mlp_bias false"}));
  c = base;
  c.erase("model_type");
  c["architectures"] = {"MistralForCausalLM"};
  EXPECT_TRUE(throws_error_with([&] { model_from_hf(c); }, {"architectures [\"MistralForCausalLM\"]"}));
}

// Each Llama variant: the export read by PyTorch from the Hugging Face names
// alone gives the engine's logits and loss, and imports back bit for bit.
struct Variant {
  const char* name;
  GPTConfig model;
};
class ExportLlama : public ::testing::TestWithParam<Variant> {};

TEST_P(ExportLlama, ReadByPyTorchAndImportedBackBitForBit) {
  ScratchDir dir(std::string("export_llama_") + GetParam().name);
  Exported x(GetParam().model);
  test::expect_reference_and_round_trip(x, dir, "Llama");
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ExportLlama,
    ::testing::Values(Variant{"GqaUntiedNoBias", llama(2, true, false)},  // llama-tiny's shape
                      Variant{"MhaTiedBiased", llama(0, false, true)},
                      Variant{"MqaUntiedBiased", llama(1, true, true)},
                      Variant{"GqaTiedNoBias", llama(2, false, false)},
                      Variant{"Qwen2GqaTied", qwen2(2, false)},  // --add-qkv-bias: Qwen2ForCausalLM
                      Variant{"Qwen2MhaUntied", qwen2(0, true)}),
    [](const auto& info) { return std::string(info.param.name); });

// Rewrites dir/hf/model.safetensors into dir/out/ (with the same config.json)
// after `edit` changed its tensors.
using Tensors = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
void rewrite(const ScratchDir& dir, const std::string& out, const std::function<void(Tensors&)>& edit) {
  SafetensorsFile f(dir / "hf/model.safetensors");
  Tensors t;
  for (const auto& [name, e] : f.entries()) t[name] = {e.shape, f.to_f32(name)};
  edit(t);
  SafetensorsWriter w;
  for (const auto& [name, v] : t) w.add(name, v.first, v.second.data());
  std::filesystem::create_directories(dir / out);
  w.write(dir / (out + "/model.safetensors"));
  std::filesystem::copy_file(dir / "hf/config.json", dir / (out + "/config.json"));
}

TEST(ImportLlama, FilesTheModelCannotHoldAreRefusedNamingTheTensor) {
  ScratchDir dir("import_llama_refusals");
  Exported x(llama(2, false, false));  // tied
  export_hf(x.model, dir / "hf");
  GPTConfig cfg;
  auto error_of = [&](const std::string& sub) {
    return test::error_message([&] { import_dir(dir / sub, &cfg); });
  };
  const std::string embed = "model.embed_tokens.weight";

  rewrite(dir, "head_copy", [&](Tensors& t) { t["lm_head.weight"] = t[embed]; });
  EXPECT_EQ(error_of("head_copy"), "");  // a tied head saved twice
  rewrite(dir, "head_other", [&](Tensors& t) {
    t["lm_head.weight"] = t[embed];
    t["lm_head.weight"].second[5] += 1.0f;
  });
  EXPECT_NE(error_of("head_other").find("lm_head.weight differs from model.embed_tokens.weight but "
                                        "config.json says tie_word_embeddings true"),
            std::string::npos)
      << error_of("head_other");
  rewrite(dir, "deeper", [&](Tensors& t) {
    t["model.layers.2.self_attn.q_proj.weight"] = t["model.layers.1.self_attn.q_proj.weight"];
  });
  EXPECT_NE(error_of("deeper").find("1 tensor(s) the model (" + x.cfg.summary() +
                                    ") has no place for: model.layers.2.self_attn.q_proj.weight"),
            std::string::npos)
      << error_of("deeper");
  rewrite(dir, "no_k", [&](Tensors& t) { t.erase("model.layers.1.self_attn.k_proj.weight"); });
  EXPECT_NE(error_of("no_k").find("no tensor model.layers.1.self_attn.k_proj.weight (for "
                                  "h.1.attn.qkv.weight)"),
            std::string::npos)
      << error_of("no_k");
  rewrite(dir, "bad_shape", [&](Tensors& t) { t["model.layers.0.mlp.up_proj.weight"].first = {32, 64}; });
  EXPECT_NE(error_of("bad_shape").find("model.layers.0.mlp.up_proj.weight has shape [32,64] but the "
                                       "model needs [64,32]"),
            std::string::npos)
      << error_of("bad_shape");

  // Accepted: older files' rotary buffers, and the base LlamaModel's names
  // without "model." (bit for bit as the export).
  rewrite(dir, "buffers", [&](Tensors& t) {
    t["model.layers.0.rotary_emb_unused"] = {{1}, {0.0f}};  // not a buffer: still refused
  });
  EXPECT_NE(error_of("buffers").find("has no place for: model.layers.0.rotary_emb_unused"),
            std::string::npos);
  rewrite(dir, "inv_freq", [&](Tensors& t) {
    t["model.layers.1.self_attn.rotary_emb.inv_freq"] = {{4}, {1.0f, 0.1f, 0.01f, 0.001f}};
  });
  EXPECT_EQ(error_of("inv_freq"), "");
  rewrite(dir, "bare", [&](Tensors& t) {
    Tensors b;
    for (auto& [name, v] : t) b[name.starts_with("model.") ? name.substr(6) : name] = v;
    t = b;
  });
  std::unique_ptr<GPT> bare = import_dir(dir / "bare", &cfg);
  EXPECT_TRUE(same_params(*bare, x.model));

  // An untied config.json over a file without lm_head.
  json c = json::parse(read_file(dir / "hf/config.json"));
  c["tie_word_embeddings"] = false;
  write_file_atomic(dir / "hf/config.json", c.dump());
  EXPECT_NE(error_of("hf").find("no tensor lm_head.weight (for lm_head.weight) (config.json's "
                                "tie_word_embeddings is false)"),
            std::string::npos)
      << error_of("hf");
}

// A model neither GPT-2 nor Llama holds: refused on export, naming the
// settings. Before, GPT-2 with SwiGLU or GQA alone (biases, wpe, tied head
// kept) passed GPT-2's layout check and was written with the wrong shapes.
TEST(ExportLlama, ModelsNoArchitectureHoldsAreRefusedNamingTheSetting) {
  GPTConfig rope = test::tiny_gpt();
  rope.position_embedding = PositionEmbedding::Rope;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(rope); },
                                {"no Hugging Face architecture holds this model", "GPT-2 has no "
                                 "--position-embedding-type rope, and Llama needs --normalization "
                                 "RMSNorm and --swiglu"}));
  GPTConfig swiglu = test::tiny_gpt();
  swiglu.swiglu = true;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(swiglu); }, {"GPT-2 has no --swiglu"}));
  GPTConfig gqa = test::tiny_gpt();
  gqa.num_query_groups = 2;
  EXPECT_TRUE(throws_error_with([&] { hf_arch_of(gqa); }, {"GPT-2 has no --num-query-groups"}));
  ScratchDir dir("export_no_arch");
  for (const GPTConfig& m : {swiglu, gqa}) {
    Exported x(m);
    EXPECT_TRUE(throws_error_with([&] { export_hf_gpt2(x.model, dir / "hf"); },
                                  {"GPT-2 export/import", "Llama-family settings"}));
  }
  // Through the CLI: one line, exit 2, nothing written.
  Exported x(rope);
  save_checkpoint(dir / "ckpt", whole_rank(x.model, nullptr), TrainState{3}, RunInfo{rope, {}, "bytes"});
  int rc;
  const std::string out =
      test::run_tessera(fmt::format("export --checkpoint {} --output {}", dir / "ckpt", dir / "out"), &rc);
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("no Hugging Face architecture holds this model"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/model.safetensors"));
}

// `tessera export` then `tessera import` of llama-tiny's shape: the same
// parameters bit for bit, the same model, step 0 and no optimizer state.
TEST(ExportLlama, CliExportThenImportIsBitExact) {
  ScratchDir dir("export_llama_cli");
  Exported x(llama(2, true, false));
  save_checkpoint(dir / "ckpt", whole_rank(x.model, nullptr), TrainState{12}, RunInfo{x.cfg, {}, "bytes"});
  int rc;
  std::string out = test::run_tessera(
      fmt::format("export --checkpoint {} --format safetensors --output {}", dir / "ckpt", dir / "hf"), &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("config.json (Llama)"), std::string::npos) << out;
  out = test::run_tessera(
      fmt::format("import --input {} --output {}", dir / "hf/model.safetensors", dir / "imported"), &rc);
  ASSERT_EQ(rc, 0) << out;
  Checkpoint ck = open_checkpoint(dir / "imported");
  EXPECT_EQ(ck.state.step, 0);
  EXPECT_FALSE(ck.has_optimizer_state);
  EXPECT_EQ(ck.run.model.summary(), x.cfg.summary());
  EXPECT_EQ(ck.run.model.norm_epsilon, x.cfg.norm_epsilon);
  EXPECT_EQ(ck.run.model.rotary_base, x.cfg.rotary_base);
  std::unique_ptr<GPT> back = load_whole_model(ck);
  EXPECT_TRUE(same_params(*back, x.model));
}

}  // namespace
}  // namespace tessera
