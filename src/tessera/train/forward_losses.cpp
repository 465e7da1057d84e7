#include "tessera/train/forward_losses.h"

#include <algorithm>

#include "tessera/core/error.h"

namespace tessera {

void split_windows(const int32_t* windows, int64_t B, int64_t T, int32_t* inputs,
                   int32_t* targets) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      inputs[b * T + t] = windows[b * (T + 1) + t];
      targets[b * T + t] = windows[b * (T + 1) + t + 1];
    }
}

void split_windows_at(const int32_t* windows, int64_t B, int64_t T,
                      std::span<const int64_t> pos, int32_t* inputs, int32_t* targets) {
  const int64_t Tl = int64_t(pos.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tl; ++t) {
      inputs[b * Tl + t] = windows[b * (T + 1) + pos[size_t(t)]];
      targets[b * Tl + t] = windows[b * (T + 1) + pos[size_t(t)] + 1];
    }
}

namespace {

// Reads the B windows from sample `first` as inputs and targets (B, T).
void load(const ForwardPass& f, int64_t first, std::vector<int32_t>& window, int32_t* inputs,
          int32_t* targets) {
  ProfileScope t(f.profile, Op::Data);
  f.data->fill(f.split, first, f.B, f.T, window.data());
  if (f.positions.empty())
    split_windows(window.data(), f.B, f.T, inputs, targets);
  else
    split_windows_at(window.data(), f.B, f.T, f.positions, inputs, targets);
}

// Micro-batches per forward-only pipeline pass: bounds the message tags
// (micro-batch x chunks) and the losses broadcast at the end of a pass.
constexpr int64_t kPipelineGroup = 64;

}  // namespace

std::vector<float> forward_losses(const ForwardPass& f, std::span<const int64_t> firsts) {
  TESSERA_CHECK(f.model && f.data && (f.pipe || f.acts), "forward_losses: model, data and "
                                                         "activations or a pipeline are needed");
  std::vector<int32_t> window(size_t(f.B * (f.T + 1)));  // (B, T + 1)
  std::vector<float> losses;
  losses.reserve(firsts.size());
  if (!f.pipe) {
    const int64_t rows = f.B * (f.positions.empty() ? f.T : int64_t(f.positions.size()));
    std::vector<int32_t> inputs(static_cast<size_t>(rows)), targets(inputs.size());  // (B, T or Tl) each
    f.acts->dropout = DropoutContext{};  // evaluation: no dropout
    for (const int64_t first : firsts) {
      load(f, first, window, inputs.data(), targets.data());
      losses.push_back(f.model->forward(*f.acts, inputs.data(), targets.data(), f.hooks));
    }
    return losses;
  }
  for (size_t g = 0; g < firsts.size(); g += size_t(kPipelineGroup)) {
    const std::span<const int64_t> group =
        firsts.subspan(g, std::min(firsts.size() - g, size_t(kPipelineGroup)));
    PipelineCallbacks cb;
    cb.data = [&](int64_t mb, int32_t* inputs, int32_t* targets) {
      load(f, group[size_t(mb)], window, inputs, targets);
    };
    cb.hooks = f.hooks;
    const std::vector<float> l = f.pipe->forward_only(cb, int64_t(group.size()));
    losses.insert(losses.end(), l.begin(), l.end());
  }
  return losses;
}

}  // namespace tessera
