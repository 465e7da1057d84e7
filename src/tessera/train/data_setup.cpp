#include "tessera/train/data_setup.h"

#include <filesystem>

#include <fmt/format.h>

#include "tessera/core/error.h"
#include "tessera/data/embedded_corpus.h"
#include "tessera/data/token_file.h"

namespace tessera {

TrainingData open_training_data(const TrainConfig& cfg, int64_t vocab_size_flag) {
  TrainingData d;
  std::vector<std::string> paths = cfg.data_paths;
  std::string vocab_file = cfg.vocab_file, merge_file = cfg.merge_file;
  TESSERA_CHECK(vocab_file.empty() == merge_file.empty(),
                "--vocab-file and --merge-file go together (got only {})",
                vocab_file.empty() ? "--merge-file" : "--vocab-file");
  if (paths.empty()) {
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

  data::OpenOptions opts;
  if (d.tokenizer) opts.tokenizer_hash = d.tokenizer->hash();
  std::unique_ptr<data::TokenSource> src = data::open_token_sources(paths, opts);
  if (vocab_size_flag > 0)
    d.vocab_size = vocab_size_flag;
  else if (d.tokenizer)
    d.vocab_size = d.tokenizer->vocab_size();
  else
    d.vocab_size = src->vocab_hint();
  TESSERA_CHECK(d.vocab_size > 0,
                "--data-path {} records no vocabulary size: pass --vocab-size, or --vocab-file and "
                "--merge-file",
                paths.front());
  TESSERA_CHECK(!d.tokenizer || d.vocab_size >= d.tokenizer->vocab_size(),
                "--vocab-size ({}) is smaller than the tokenizer's vocabulary ({})", d.vocab_size,
                d.tokenizer->vocab_size());
  src->set_vocab_limit(uint32_t(d.vocab_size));
  // An id outside the vocabulary is reported before training when one pass
  // over the data is cheap (up to 2^28 tokens: about a second); larger
  // datasets are checked window by window as they are read.
  if (src->size() <= (int64_t(1) << 28)) src->validate_all();
  d.batches = std::make_unique<SampledBatches>(std::move(src), d.vocab_size,
                                               cfg.model.seq_length, cfg.seed, cfg.valid_fraction);
  return d;
}

}  // namespace tessera
