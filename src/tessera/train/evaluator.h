// `tessera eval`: the loss and perplexity of a trained model (a checkpoint,
// or a Hugging Face GPT-2 or Llama safetensors file) on the validation windows of a
// BatchSource — window i is tokens [i*T, i*T + T + 1) of the split, the
// windows `train`'s validation reads — under any tp x pp x dp layout. The
// model's shape comes from the checkpoint's own metadata (or config.json).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/ckpt/checkpoint.h"
#include "tessera/comm/communicator.h"
#include "tessera/comm/grid.h"
#include "tessera/config/gpt_config.h"
#include "tessera/model/gpt.h"
#include "tessera/train/batch_source.h"
#include "tessera/train/train_config.h"

namespace tessera {

// The model to evaluate, before any weights are read.
struct EvalModel {
  GPTConfig config;
  std::string label;        // "DIR/step_000300 (step 300)" or the safetensors path
  int64_t micro_batch = 1;  // the checkpoint's --micro-batch-size (safetensors: 1)
  std::string tokenizer;    // a vocab.json + merges.txt directory, "bytes" or "" (unknown)
  uint64_t tokenizer_hash = 0;  // the checkpoint's recorded tokenizer hash (0: not recorded)
  std::optional<ckpt::Checkpoint> checkpoint;
  std::string safetensors;  // set when the model is a safetensors file

  // Fills this rank's slice of the weights (model's layout: any tp, pp).
  void load_into(GPT& model) const;
};

// checkpoint: a step or --save directory; else safetensors (hf_config: its
// config.json, default beside it). Throws tessera::Error naming the flag.
EvalModel open_eval_model(const std::string& checkpoint, const std::string& safetensors,
                          const std::string& hf_config);

struct EvalResult {
  double loss = 0;       // mean over every predicted token
  int64_t windows = 0;   // windows of T + 1 tokens read
  int64_t tokens = 0;    // tokens predicted: windows x T
  double seconds = 0;
  double perplexity() const;
};

// The mean loss over `windows` windows of Split::Valid of `data` (0: one
// pass over them, data.windows(Split::Valid)), in micro-batches of
// c.par.micro_batch dealt round-robin over the dp ranks; a last, shorter
// micro-batch holds the rest. c: the model and layout (par.tp, pp, dp,
// micro_batch; fp32). Collective over world (grid built from c.par).
EvalResult evaluate_model(const EvalModel& m, const TrainConfig& c, const BatchSource& data,
                          int64_t windows, comm::Communicator& world, comm::Grid& grid);

}  // namespace tessera
