// `tessera generate`: continue a prompt with a trained model, printing the
// text as it is sampled.
#include <fmt/core.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/cli/commands.h"
#include "tessera/cli/flag_checks.h"
#include "tessera/config/model_fields.h"
#include "tessera/core/error.h"
#include "tessera/data/tokenizer.h"
#include "tessera/data/tokenizer_identity.h"
#include "tessera/model/generate.h"

namespace tessera::cli {

namespace {

// Text <-> tokens: byte-level (token = byte) or a BPE tokenizer directory.
class TextCodec {
 public:
  TextCodec(const std::string& spec, int64_t model_vocab) {
    TESSERA_CHECK(!spec.empty(),
                  "the checkpoint records no tokenizer: pass --tokenizer DIR (vocab.json + "
                  "merges.txt) or --tokenizer bytes");
    if (spec != "bytes") {
      bpe_.emplace(data::Tokenizer::load(spec));
      TESSERA_CHECK(bpe_->vocab_size() <= model_vocab,
                    "tokenizer {} has {} tokens but the model only {}", spec, bpe_->vocab_size(),
                    model_vocab);
    } else {
      TESSERA_CHECK(model_vocab >= 256, "byte-level text needs a vocabulary of 256 (model: {})",
                    model_vocab);
    }
  }
  std::vector<int32_t> encode(const std::string& text) const {
    if (bpe_) return bpe_->encode(text);
    return bytes_of(text);
  }
  // Bytes of one token; ids the tokenizer does not know (vocabulary
  // padding a poorly trained model may still pick) print as U+FFFD.
  std::string piece(int32_t id) const {
    if (bpe_) return id < bpe_->vocab_size() ? bpe_->token_bytes(id) : "\xEF\xBF\xBD";
    return id < 256 ? std::string(1, char(id)) : "\xEF\xBF\xBD";
  }
  int32_t eot() const { return bpe_ ? bpe_->eot_id() : -1; }

 private:
  static std::vector<int32_t> bytes_of(const std::string& s) {
    std::vector<int32_t> out;
    for (unsigned char c : s) out.push_back(c);
    return out;
  }
  std::optional<data::Tokenizer> bpe_;
};

}  // namespace

void register_generate(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "continue a prompt with a trained model (streams text)");
  struct Opts {
    std::string checkpoint, prompt, tokenizer;
    int64_t max_new_tokens = 128, top_k = 0;
    float temperature = 0.8f, top_p = 1.0f;
    uint64_t seed = 0;
    bool ignore_eot = false, no_kv_cache = false;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("--checkpoint", o->checkpoint,
                  "checkpoint directory (a step directory, or a --save directory: its latest)")
      ->required();
  sub->add_option("--prompt", o->prompt, "text to continue")->capture_default_str();
  sub->add_option("--max-new-tokens", o->max_new_tokens, "tokens to generate")
      ->check(fits_int64())
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "softmax temperature (0: greedy)")
      ->capture_default_str();
  sub->add_option("--top-k", o->top_k, "sample from the k most likely tokens (0: all)")
      ->capture_default_str();
  sub->add_option("--top-p", o->top_p, "nucleus: the smallest set with this probability (1: all)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "sampling seed (same seed, same text)")
      ->check(not_negative())
      ->capture_default_str();
  sub->add_option("--tokenizer", o->tokenizer,
                  "'bytes' or a vocab.json + merges.txt directory (default: the checkpoint's)");
  sub->add_flag("--ignore-eot", o->ignore_eot, "keep going after <|endoftext|>");
  sub->add_flag("--no-kv-cache", o->no_kv_cache, "recompute the whole context every token (slow; for checking)");
  sub->callback([o] {
    // Every numeric flag's range, before the checkpoint is read.
    TESSERA_CHECK(o->max_new_tokens >= 0, "--max-new-tokens must be >= 0 (got {})",
                  o->max_new_tokens);
    TESSERA_CHECK(std::isfinite(o->temperature) && o->temperature >= 0,
                  "--temperature must be a finite number >= 0 (got {})", o->temperature);
    TESSERA_CHECK(o->top_p > 0 && o->top_p <= 1, "--top-p must be in (0, 1] (got {})", o->top_p);
    TESSERA_CHECK(o->top_k >= 0, "--top-k must be >= 0 (got {})", o->top_k);
    ckpt::Checkpoint ck = ckpt::open_checkpoint(o->checkpoint);
    for (const auto& n : ck.notes) fmt::print(stderr, "tessera: note: {}\n", n);
    // Another tokenizer than the model's decodes its ids into other text
    // (mojibake): refused where both are known.
    if (!o->tokenizer.empty())
      data::same_tokenizer(
          {data::model_tokenizer("the model " + ck.path, ck.run.tokenizer, ck.run.tokenizer_hash),
           {"--tokenizer " + o->tokenizer, data::tokenizer_spec_hash(o->tokenizer)}});
    std::unique_ptr<GPT> model = ckpt::load_whole_model(ck);
    TextCodec codec(o->tokenizer.empty() ? ck.run.tokenizer : o->tokenizer, ck.run.model.vocab_size);

    std::vector<int32_t> prompt = codec.encode(o->prompt);
    if (prompt.empty()) {
      TESSERA_CHECK(codec.eot() >= 0, "--prompt is empty and the tokenizer has no <|endoftext|> to start from");
      prompt.push_back(codec.eot());
    }
    fmt::print(stderr, "tessera: {} (step {}), {} prompt tokens\n", ck.path, ck.state.step, prompt.size());
    GenerateConfig g;
    g.max_new_tokens = o->max_new_tokens;
    g.sampling = {o->temperature, o->top_k, o->top_p};
    g.seed = o->seed;
    g.stop_token = o->ignore_eot ? -1 : codec.eot();
    g.use_kv_cache = !o->no_kv_cache;
    std::fwrite(o->prompt.data(), 1, o->prompt.size(), stdout);
    std::fflush(stdout);
    int64_t produced = 0;
    bool stopped_at_eot = false;
    generate(*model, prompt, g, [&](int32_t t) {
      ++produced;
      if (t == g.stop_token) {  // not printed; said on stderr below
        stopped_at_eot = true;
        return true;
      }
      std::string s = codec.piece(t);
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);  // the text first, where both go to one terminal or log
    // Why the text ends, on stderr so stdout stays the text alone.
    if (stopped_at_eot)
      fmt::print(stderr, "tessera: stopped at <|endoftext|> after {} tokens (--ignore-eot goes on)\n",
                 produced);
    else
      fmt::print(stderr, "tessera: stopped after --max-new-tokens {}\n", produced);
  });
}

}  // namespace tessera::cli
