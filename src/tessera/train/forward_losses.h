// Forward-only losses of micro-batches, the one evaluation loop that
// `train`'s validation (Trainer::evaluate) and `tessera eval` share: without
// a pipeline each micro-batch is one GPT::forward; with one, the micro-batches
// go through the pipeline executor's forward-only pass, in groups, and every
// pp rank gets the last stage's losses. No dropout, no gradients.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/model/activations.h"
#include "tessera/model/gpt.h"
#include "tessera/parallel/pipeline_executor.h"
#include "tessera/train/batch_source.h"

namespace tessera {

// Splits windows (B, T + 1) into inputs and next-token targets (B, T) each.
void split_windows(const int32_t* windows, int64_t B, int64_t T, int32_t* inputs,
                   int32_t* targets);
// The same for the rows a context-parallel rank holds: inputs and targets
// (B, Tl) at the global positions pos (Tl) of each window.
void split_windows_at(const int32_t* windows, int64_t B, int64_t T,
                      std::span<const int64_t> pos, int32_t* inputs, int32_t* targets);

struct ForwardPass {
  GPT* model = nullptr;
  PipelineExecutor* pipe = nullptr;  // pp > 1: the stage's executor (its slots hold B windows)
  Activations* acts = nullptr;       // pp == 1: activations of (B, T)
  LayerHooks* hooks = nullptr;       // e.g. ZeRO-3's gathers (optional)
  const BatchSource* data = nullptr;
  Split split = Split::Valid;
  int64_t B = 1, T = 1;
  Profile* profile = nullptr;  // the data reads are charged to it (optional)
  // Context parallelism: the global positions of this rank's rows (Tl);
  // empty: all T. The losses are then the means over this rank's rows.
  std::span<const int64_t> positions = {};
};

// The mean loss over the B * T tokens of each micro-batch whose first window
// is sample firsts[k] of the split; (firsts.size(),), the same on every rank
// of a tp / pp group. Collective over the model's tp group and the pp group,
// and over dp through hooks that gather: every rank of a group must pass the
// same number of micro-batches.
std::vector<float> forward_losses(const ForwardPass& f, std::span<const int64_t> firsts);

}  // namespace tessera
