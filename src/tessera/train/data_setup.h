// Opening the training data named by a TrainConfig: token files given with
// --data-path (tessera, Megatron indexed or llm.c formats; a weighted blend
// `0.7 a 0.3 b`; --valid-data-path for validation), or the embedded
// fortunes corpus; the tokenizer that goes with them; and the model's
// vocabulary size. Everything is checked here, before the model allocates.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "tessera/data/tokenizer.h"
#include "tessera/data/tokenizer_identity.h"
#include "tessera/train/sampled_batches.h"
#include "tessera/train/train_config.h"

namespace tessera {

struct TrainingData {
  std::unique_ptr<BatchSource> batches;  // SampledBatches, or a blend / train+valid of them
  std::optional<data::Tokenizer> tokenizer;  // absent for data without known tokenizer files
  std::string tokenizer_dir;                 // the tokenizer's directory, absolute ("" if none)
  std::string vocab_file, merge_file;        // its BPE files, absolute ("" if none)
  int64_t vocab_size = 0;                    // the model's real vocabulary
  uint64_t tokenizer_hash = 0;               // the data's tokenizer (Tokenizer::hash(); 0: unknown)
  std::string note;                          // e.g. "built the embedded corpus cache in ..."
};

// vocab_size_flag: --vocab-size (0: from the tokenizer or the data file).
// model: the tokenizer of the model the data is for (a checkpoint's; {}:
// none yet). Every file, the tokenizer files and the model must have one
// tokenizer (data/tokenizer_identity.h), or it throws naming two of them.
TrainingData open_training_data(const TrainConfig& cfg, int64_t vocab_size_flag,
                                const data::TokenizerId& model = {});

}  // namespace tessera
