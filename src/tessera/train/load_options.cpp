#include "tessera/train/load_options.h"

#include <fmt/format.h>

#include "tessera/config/config_json.h"
#include "tessera/config/model_fields.h"
#include "tessera/core/error.h"

namespace tessera {

std::vector<std::string> apply_checkpoint_args(TrainConfig& c, const ckpt::Checkpoint& ck,
                                               const std::set<std::string>& explicit_flags) {
  const GPTConfig& from = ck.run.model;
  GPTConfig& m = c.model;
  std::vector<std::string> notes;
  // (flag, this run's value, the checkpoint's): the sizes that decide a
  // parameter's shape, and the sequence the positions were trained for.
  auto take = [&](const char* flag, int64_t& mine, int64_t theirs) {
    if (explicit_flags.count(flag) && mine != theirs)
      notes.push_back(fmt::format("--use-checkpoint-args: {} {} replaced by the checkpoint's {}",
                                  flag, mine, theirs));
    mine = theirs;
  };
  take(flag::num_layers, m.num_layers, from.num_layers);
  take(flag::hidden_size, m.hidden_size, from.hidden_size);
  take(flag::num_heads, m.num_heads, from.num_heads);
  take(flag::ffn_hidden_size, m.ffn_hidden_size, from.ffn());
  // A fine-tune's --seq-length is its own (up to the positions): it shapes
  // the batches, not a parameter, and a 1024-position file trains on less.
  if (!(c.finetune && explicit_flags.count(flag::seq_length)))
    take(flag::seq_length, m.seq_length, from.seq_length);
  take(flag::max_positions, m.max_position_embeddings, from.positions());
  take(flag::vocab_size, m.vocab_size, from.vocab_size);
  take(flag::vocab_divisor, m.make_vocab_size_divisible_by,
       from.make_vocab_size_divisible_by);
  // The family's switches decide the parameters as much as the sizes do.
  const GPTConfig before = m;
  m.normalization = from.normalization;
  m.norm_epsilon = from.norm_epsilon;
  m.swiglu = from.swiglu;
  m.position_embedding = from.position_embedding;
  m.rotary_base = from.rotary_base;
  m.num_query_groups = from.num_query_groups;
  m.untie_embeddings = from.untie_embeddings;
  m.add_bias_linear = from.add_bias_linear;
  m.add_qkv_bias = from.add_qkv_bias;
  // The experts and their routing, likewise (an imported Mixtral or
  // Qwen2-MoE trains with --use-checkpoint-args alone).
  m.num_experts = from.num_experts;
  m.moe_layer_freq = from.moe_layer_freq;
  m.moe_router_topk = from.moe_router_topk;
  m.moe_router_pre_softmax = from.moe_router_pre_softmax;
  m.moe_shared_expert_intermediate_size = from.moe_shared_expert_intermediate_size;
  m.moe_shared_expert_gate = from.moe_shared_expert_gate;
  if (const std::string d = model_difference(before, m); !d.empty())
    notes.push_back(fmt::format(
        "--use-checkpoint-args: the architecture taken from the checkpoint ({}: this run's flags "
        "vs the checkpoint's)",
        d));
  return notes;
}

GPTConfig compared_model(const TrainConfig& c, const ckpt::Checkpoint& ck) {
  GPTConfig m = ck.run.model;
  if (c.finetune) m.seq_length = c.model.seq_length;
  return m;
}

void check_load_options(const TrainConfig& c, const ckpt::Checkpoint& ck) {
  const std::string& dir = c.load_dir;
  if (loads_optimizer(c))
    TESSERA_CHECK(ck.has_optimizer_state,
                  "--load {}: checkpoint {} has no optimizer state to resume ({}): pass "
                  "--finetune to start from its weights at step 1, or --no-load-optim to keep its "
                  "step {} with a fresh optimizer",
                  dir, ck.path,
                  ck.state.extra.contains("imported_from") ? "it is an import" : "weights only",
                  ck.state.step);
  if (loads_seed(c) && ck.state.has_seed)
    TESSERA_CHECK(ck.state.seed == c.seed,
                  "--load {}: the checkpoint was trained with --seed {}, this run has --seed {} "
                  "(the data order would differ; pass --no-load-rng to continue with this run's "
                  "seed)",
                  dir, ck.state.seed, c.seed);
  const std::string diff = model_difference(compared_model(c, ck), c.model);
  TESSERA_CHECK(diff.empty(),
                "--load {}: checkpoint {} holds a different model ({}: checkpoint vs this run){}",
                dir, ck.path, diff,
                c.use_checkpoint_args ? ""
                                      : " (pass --use-checkpoint-args to take the checkpoint's "
                                        "model shape)");
}

std::string describe_load(const TrainConfig& c, const ckpt::Checkpoint& ck) {
  std::string what = "weights";
  what += loads_step(c) ? fmt::format(", step {}", ck.state.step) : ", starting at step 1";
  what += loads_optimizer(c) ? ", optimizer state" : ", fresh optimizer";
  if (loads_seed(c) && ck.state.has_seed)
    what += fmt::format(", seed {}", ck.state.seed);
  else
    what += fmt::format(", this run's seed {}", c.seed);
  return what;
}

}  // namespace tessera
