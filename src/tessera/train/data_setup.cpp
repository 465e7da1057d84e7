#include "tessera/train/data_setup.h"

#include <filesystem>

#include <fmt/format.h>

#include "tessera/config/model_fields.h"
#include "tessera/core/error.h"
#include "tessera/data/data_blend.h"
#include "tessera/data/embedded_corpus.h"
#include "tessera/data/token_file.h"
#include "tessera/data/tokenizer_identity.h"
#include "tessera/train/blended_batches.h"

namespace tessera {

TrainingData open_training_data(const TrainConfig& cfg, int64_t vocab_size_flag,
                                const data::TokenizerId& model) {
  TrainingData d;
  const data::DataBlend blend = data::parse_data_blend(cfg.data_paths, "--data-path");
  std::vector<std::string> paths = blend.paths;
  std::string vocab_file = cfg.vocab_file, merge_file = cfg.merge_file;
  TESSERA_CHECK(vocab_file.empty() == merge_file.empty(),
                "--vocab-file and --merge-file go together (got only {})",
                vocab_file.empty() ? "--merge-file" : "--vocab-file");
  if (paths.empty()) {
    TESSERA_CHECK(cfg.valid_data_paths.empty(),
                  "--valid-data-path needs --data-path (the embedded corpus holds out its own)");
    TESSERA_CHECK(vocab_file.empty(),
                  "--vocab-file/--merge-file need --data-path (the embedded corpus brings its own)");
    const std::string cache = cfg.cache_dir.empty() ? data::default_cache_dir() : cfg.cache_dir;
    data::EmbeddedCorpus corpus = data::ensure_embedded_corpus(cache);
    paths = {corpus.token_file};
    vocab_file = corpus.tokenizer_dir + "/vocab.json";
    merge_file = corpus.tokenizer_dir + "/merges.txt";
    d.note = fmt::format("{} the embedded fortunes corpus (BPE {}) in {}",
                         corpus.built_now ? "built" : "reused", data::kEmbeddedVocabSize,
                         corpus.tokenizer_dir);
  }
  for (const auto& p : {vocab_file, merge_file})
    TESSERA_CHECK(p.empty() || std::filesystem::is_regular_file(p), "{}: no such file", p);
  if (!vocab_file.empty()) {
    d.tokenizer = data::Tokenizer::load(vocab_file, merge_file);
    // Absolute: checkpoints record where the tokenizer came from.
    d.vocab_file = std::filesystem::absolute(vocab_file).lexically_normal().string();
    d.merge_file = std::filesystem::absolute(merge_file).lexically_normal().string();
    d.tokenizer_dir = std::filesystem::path(d.vocab_file).parent_path().string();
  }

  // A blend opens each file on its own (each is sampled alone); plain paths
  // are read end to end as one sequence.
  std::vector<std::unique_ptr<data::TokenSource>> train_sources;
  if (blend.weighted())
    for (const auto& p : paths) train_sources.push_back(data::open_token_source(p));
  else
    train_sources.push_back(data::open_token_sources(paths));
  std::unique_ptr<data::TokenSource> valid_source;
  if (!cfg.valid_data_paths.empty())
    valid_source = data::open_token_sources(cfg.valid_data_paths);
  // One tokenizer for all of it (before the id check below, whose "id out
  // of range" would hide the reason): the model's, the tokenizer files',
  // every training file's and the validation files'.
  std::vector<data::TokenizerId> ids = {model};
  if (d.tokenizer)
    ids.push_back({cfg.vocab_file.empty() ? "the embedded corpus's tokenizer " + d.tokenizer_dir
                                          : "--vocab-file " + d.vocab_file,
                   d.tokenizer->hash()});
  for (const auto& src : train_sources) ids.push_back({"--data-path " + src->path(), src->tokenizer_hash()});
  if (valid_source) ids.push_back({"--valid-data-path " + valid_source->path(), valid_source->tokenizer_hash()});
  d.tokenizer_hash = data::same_tokenizer(ids).hash;

  if (vocab_size_flag > 0)
    d.vocab_size = vocab_size_flag;
  else if (d.tokenizer)
    d.vocab_size = d.tokenizer->vocab_size();
  else
    d.vocab_size = train_sources.front()->vocab_hint();
  TESSERA_CHECK(d.vocab_size > 0,
                "--data-path {} records no vocabulary size: pass --vocab-size, or --vocab-file and "
                "--merge-file",
                paths.front());
  TESSERA_CHECK(!d.tokenizer || d.vocab_size >= d.tokenizer->vocab_size(),
                "{} ({}) is smaller than the tokenizer's vocabulary ({})", flag::vocab_size,
                d.vocab_size, d.tokenizer->vocab_size());
  const int64_t T = cfg.model.seq_length;
  // With a separate validation set the training files are not split.
  const double valid_fraction = valid_source ? 0.0 : cfg.valid_fraction;
  auto sampled = [&](std::unique_ptr<data::TokenSource> src, double valid, double test) {
    src->set_vocab_limit(uint32_t(d.vocab_size));
    // An id outside the vocabulary is reported before training when one
    // pass over the data is cheap (up to 2^28 tokens: about a second);
    // larger datasets are checked window by window as they are read.
    if (src->size() <= (int64_t(1) << 28)) src->validate_all();
    return std::make_unique<SampledBatches>(std::move(src), d.vocab_size, T, cfg.seed, valid, test);
  };
  std::vector<std::unique_ptr<BatchSource>> parts;
  for (auto& src : train_sources)
    parts.push_back(sampled(std::move(src), valid_fraction, cfg.test_fraction));
  if (blend.weighted())
    d.batches = std::make_unique<BlendedBatches>(std::move(parts), blend.weights);
  else
    d.batches = std::move(parts.front());
  if (valid_source)
    d.batches = std::make_unique<TrainValidBatches>(std::move(d.batches),
                                                    sampled(std::move(valid_source), 0.0, 0.0));
  return d;
}

}  // namespace tessera
