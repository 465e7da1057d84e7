// Checkpoints: one directory per step, committed atomically, every file
// checksummed, every tensor described by its global shape and the slices
// each shard holds — so a single rank, a tp x pp x dp job and a ZeRO job
// write the same format with more or fewer shards, and any layout can read
// any other's checkpoint (tensors are assembled by global index).
//
//   DIR/latest                      "step_000100\n", replaced atomically
//   DIR/step_000100/metadata.json   run state, configs, tensors, shards, files + CRC32C
//   DIR/step_000100/metadata.crc32c metadata.json's own CRC32C
//   DIR/step_000100/params-tp00-pp00-dp000.bin      fp32, a flat range of the rank's layout
//   DIR/step_000100/exp_avg-tp00-pp00-dp000.bin     AdamW m over the rank's optimizer range
//   DIR/step_000100/exp_avg_sq-tp00-pp00-dp000.bin  AdamW v
//   DIR/step_000100/tokenizer/vocab.json, merges.txt  the run's BPE files (tokenizer_files.h)
//
// Writing: every rank writes its files into DIR/.step_000100.tmp-<tag>/ with
// a small shard manifest; after a barrier rank 0 merges the manifests into
// metadata.json, fsyncs, renames the directory to step_000100, fsyncs DIR,
// points `latest` at it and prunes old steps (renamed to a hidden trash
// name, then deleted). A crash at any point leaves
// either the previous checkpoint or the new one, never a half-written one
// under a loadable name. metadata.json's schema is in metadata.h. Which run
// may write into DIR is save_dir_owner.h's business (the CLI asks it first).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/config/gpt_config.h"
#include "tessera/model/param_layout.h"
#include "tessera/config/parallel_config.h"

namespace tessera {
class AdamW;
class GPT;
namespace comm {
class Communicator;
}
}  // namespace tessera

namespace tessera::ckpt {

// 2: every shard piece carries its own CRC32C (metadata.h). Version 1
// checkpoints (no per-piece checksum) are still read.
inline constexpr int kFormatVersion = 2;
inline constexpr int kOldestReadableVersion = 1;

// Everything besides tensors that a run needs to continue bit for bit.
struct TrainState {
  int64_t step = 0;              // optimizer steps done: AdamW's t and the LR schedule's position
  int64_t consumed_samples = 0;  // training samples drawn so far: where the data resumes
  uint64_t seed = 0;             // --seed. Init, data order and sampling draw from (seed, index)
                                 // (core/rng.h), so with step and samples it is all the RNG state.
  nlohmann::json extra = nlohmann::json::object();  // anything else the trainer wants back
  bool has_seed = true;  // false: no run has drawn from a seed yet (an import); seed not written
};

// What the run is: written with every checkpoint, read before any allocation.
struct RunInfo {
  GPTConfig model;
  ParallelConfig par;     // the layout that wrote it (loading may use another)
  std::string tokenizer;  // "bytes" (token = byte), a vocab.json + merges.txt directory, or ""
  // Writing: the BPE files copied into the checkpoint (tokenizer_files.h),
  // when not vocab.json + merges.txt of `tokenizer` (e.g. Megatron's
  // gpt2-vocab.json). Reading: `tokenizer` is the directory of the copies.
  std::string vocab_file, merge_file;
  // Tokenizer::hash() of the tokenizer the model was trained with, 0 when
  // unknown (data that records none; checkpoints written before it was
  // recorded). Known even when no tokenizer files are (token files carry it).
  uint64_t tokenizer_hash = 0;
};

// Elements [begin, end) of a rank's flat buffer (laid out by its
// ParamLayout), held at `data` (data[0] is element begin).
struct DataRange {
  int64_t begin = 0, end = 0;
  const float* data = nullptr;
};

// One rank's share of a checkpoint: ranges of its flat buffers laid out by
// `layout`. One range each on a single rank; under ZeRO the rank's slice of
// every unit. Parameters replicated over dp (ZeRO 0-2) are written by dp
// rank 0 only: the others leave `params` empty. Unit padding is not saved.
struct ShardView {
  const ParamLayout* layout = nullptr;
  int64_t tp_rank = 0, pp_rank = 0, dp_rank = 0;  // names this rank's files
  std::vector<DataRange> params;
  std::vector<DataRange> exp_avg, exp_avg_sq;  // empty: no optimizer state in this shard
};

// The whole of one rank's model (and optimizer, if given).
ShardView whole_rank(GPT& model, AdamW* optim, int64_t tp_rank = 0, int64_t pp_rank = 0,
                     int64_t dp_rank = 0);

struct SaveOptions {
  int keep = 0;  // --save-keep: keep the newest K step directories (0: keep all)
  // Every rank that writes a shard of this checkpoint (the world), or null
  // for one process. save_checkpoint is then collective over it.
  comm::Communicator* comm = nullptr;
};

// Write and commit a checkpoint of step state.step under dir. Returns the
// step directory. Collective over opts.comm when set.
std::string save_checkpoint(const std::string& dir, const ShardView& shard, const TrainState& state,
                            const RunInfo& run, const SaveOptions& opts = {});

// ---- the steps save_checkpoint is made of, for callers with their own sync ----
std::string step_dir_name(int64_t step);  // "step_000100"
// Rank 0, before any rank writes: remove what crashed saves and prunes left
// under dir (staging and trash directories, latest.tmp-*; step_dirs.h) and
// create DIR/.step_N.tmp-<tag>. Returns its path.
std::string begin_staging(const std::string& dir, int64_t step, const std::string& tag);
// Every rank: write its files and shard manifest into the staging directory.
void write_shard(const std::string& staging, const ShardView& shard);
// Rank 0, after every rank's write_shard returned (a barrier): check that
// `expected_shards` manifests are there, write metadata.json, rename to the
// step directory, update `latest`, keep the newest `keep`. Returns the step dir.
std::string commit_checkpoint(const std::string& dir, const std::string& staging,
                              int64_t expected_shards, const TrainState& state, const RunInfo& run,
                              int keep);

// ---- reading ----
struct Checkpoint {
  std::string path;  // the step directory in use
  TrainState state;
  RunInfo run;
  nlohmann::json metadata;
  bool has_optimizer_state = false;
  // What resolving `dir` had to skip, for the log: e.g. "step_000200 is
  // unusable (...); using the previous good checkpoint step_000100".
  std::vector<std::string> notes;
};

// dir: a step directory (used as is: any problem is an error naming the
// file), or a checkpoint root: `latest`, and if that is unusable the newest
// older step that is. verify: check every file's size and CRC32C (size alone
// when false: for ranks that trust rank 0's check).
Checkpoint open_checkpoint(const std::string& dir, bool verify = true);

// Check one step directory: metadata parses, every file is there with its
// size and checksum, and every size and offset in metadata is sane
// (metadata.h check_metadata). Throws tessera::Error naming the file.
void verify_checkpoint(const std::string& step_dir);

// Fill elements [begin, end) of a flat buffer laid out by `layout` (out
// points at element begin). The layout may differ from the writer's (other
// tp, pp, ZeRO sharding): tensors are matched by name and global index. The
// model must be the same (an error names the first difference).
void load_params(const Checkpoint& ck, const ParamLayout& layout, int64_t begin, int64_t end,
                 float* out);
// Throws tessera::Error naming ck and the first difference unless model `want`
// is the model the checkpoint holds. Every load_* below that is given a
// model (load_into, load_zero_shard) runs it before reading anything.
// Every size that decides a parameter's shape or meaning must match
// (config_json.h model_difference: layers, hidden, heads, ffn, vocabulary,
// sequence and positions, and the Llama family's switches: normalization
// and its epsilon, SwiGLU, rope and its base, query groups, untied head,
// linear biases); the vocabulary padding
// (--make-vocab-size-divisible-by), micro-batch and layout may differ.
void check_same_model(const Checkpoint& ck, const GPTConfig& want);

// AdamW moments of [begin, end) (a ZeRO range may run past layout.numel():
// the padding is zeroed). Zeros when the checkpoint has no optimizer state.
void load_optimizer(const Checkpoint& ck, const ParamLayout& layout, int64_t begin, int64_t end,
                    float* exp_avg, float* exp_avg_sq);

// load_params over the whole model, and load_optimizer over optim's range.
void load_into(const Checkpoint& ck, GPT& model, AdamW* optim);

// The whole model on one process (tp = 1, one stage), whatever layout wrote
// the checkpoint: for generation and export.
std::unique_ptr<GPT> load_whole_model(const Checkpoint& ck);

}  // namespace tessera::ckpt
