// `tessera train`: flags use Megatron-LM's names where Megatron has the same
// setting; `--config FILE` reads the same names from a TOML file (flags given
// on the command line win).
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "tessera/cli/collective_errors.h"
#include "tessera/cli/commands.h"
#include "tessera/cli/config_file.h"
#include "tessera/cli/field_options.h"
#include "tessera/cli/flag_checks.h"
#include "tessera/cli/train_run.h"
#include "tessera/data/data_blend.h"
#include "tessera/data/tokenizer_identity.h"
#include "tessera/comm/grid.h"
#include "tessera/config/model_fields.h"
#include "tessera/config/parallel_fields.h"
#include "tessera/comm/launch_env.h"
#include "tessera/comm/mpi_runtime.h"
#include "tessera/comm/node_local.h"
#include "tessera/core/checked_math.h"
#include "tessera/core/error.h"
#include "tessera/kernels/cpu_backend_info.h"
#include "tessera/model/param_layout.h"
#include "tessera/core/memory_info.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/train/data_setup.h"
#include "tessera/train/load_options.h"
#include "tessera/train/memory_check.h"
#include "tessera/train/run_fields.h"
#include "tessera/train/train_fields.h"
#include "tessera/train/run_outputs.h"
#include "tessera/train/trainer.h"

namespace tessera::cli {

namespace {

// --num-query-groups and --group-query-attention go together.
void check_query_group_flags(const CLI::App* sub, const GPTConfig& m) {
  const bool gqa = sub->get_option(flag::group_query_attention)->count() > 0;
  TESSERA_CHECK(!gqa || m.num_query_groups >= 1,
                "{} needs {} G (key/value heads, >= 1)", flag::group_query_attention,
                flag::num_query_groups);
  TESSERA_CHECK(gqa || m.num_query_groups == 0,
                "{} {} needs {} (Megatron-LM ignores it without; tessera refuses rather than "
                "train another model than asked)",
                flag::num_query_groups, m.num_query_groups, flag::group_query_attention);
}

// The model's shape: GPTConfig (config/model_fields.cpp), the Llama
// family's switches under Megatron-LM's names. --num-query-groups takes
// effect with --group-query-attention only, as in Megatron;
// check_query_group_flags refuses one without the other.
void add_model_options(CLI::App* sub, GPTConfig& m) {
  // Megatron's defaults (0.1), unlike the library's (0: the fp32 reference).
  m.attention_dropout = 0.1f;
  m.hidden_dropout = 0.1f;
  add_field_options(sub, model_fields(), m);
}

// The parallel layout and schedule (ParallelConfig, declared in
// config/parallel_fields.cpp), and the pipeline trace.
void add_parallel_options(CLI::App* sub, TrainConfig& c) {
  add_field_options(sub, parallel_fields(), c.par);
  add_field_options(sub, trace_fields(), c);
}

// Optimizer, data, logging and checkpoints (train/train_fields.h), and the
// options that are not plain fields: --seed's check, the data flags that
// exclude one another, --peak-file's default (a path found at run time),
// --loss-scale (a value that also turns dynamic scaling off).
void add_run_options(CLI::App* sub, TrainConfig& c) {
  sub->add_option("--train-iters", c.train_iters, "optimizer steps")->capture_default_str();
  add_field_options(sub, optim_fields(), c.optim);
  sub->add_option("--seed", c.seed, "seed of initialisation and data sampling")
      ->check(not_negative())
      ->capture_default_str();
  sub->add_option("--data-path", c.data_paths,
                  "token files: tessera (.tok), Megatron indexed (.bin/.idx prefix) or llm.c "
                  "(.bin), read end to end; or a weighted blend, weight path weight path "
                  "(0.7 a.bin 0.3 b.bin) (default: the embedded fortunes corpus)");
  auto* valid_path = sub->add_option("--valid-data-path", c.valid_data_paths,
                                     "validation token files (the training data is then not split)");
  sub->add_option("--vocab-file", c.vocab_file, "GPT-2 style vocab.json of the data's tokenizer");
  sub->add_option("--merge-file", c.merge_file, "GPT-2 style merges.txt of the data's tokenizer");
  sub->add_option("--cache-dir", c.cache_dir,
                  "where the embedded corpus is cached (default: ~/.cache/tessera)");
  auto* split_valid =
      sub->add_option("--split-valid", c.valid_fraction,
                      "fraction of the data held out for validation")
          ->capture_default_str();
  // Megatron's --split: train,valid,test shares of each file (969,30,1).
  auto* split = sub->add_option_function<std::string>(
         "--split",
         [&c](const std::string& text) {
           const data::SplitFractions f = data::parse_split(text);
           c.valid_fraction = f.valid;
           c.test_fraction = f.test;
         },
         "train,valid,test shares of the data (e.g. 969,30,1; the test part is held out)")
      ->excludes(split_valid);
  valid_path->excludes(split_valid)->excludes(split);
  add_field_options(sub, log_fields(), c);
  sub->add_option("--peak-file", c.peak_file, "measured GEMM peak, reported beside MFU (default: " +
                                                  default_peak_file() + ")");
  add_field_options(sub, run_fields(), c);  // precision and overlap switches
  auto& ls = c.loss_scale;
  sub->add_option_function<float>(
      "--loss-scale", [&ls](float v) { ls.dynamic = false; ls.static_scale = v; },
      "--fp16: a static loss scale (default: dynamic)");
  add_field_options(sub, loss_scale_fields(), ls);
  add_field_options(sub, process_fields(), c);
}

// In --help order: model, layout, the rest.
void add_train_options(CLI::App* sub, TrainConfig& c) {
  add_model_options(sub, c.model);
  add_parallel_options(sub, c);
  add_run_options(sub, c);
}

struct LaunchFlags {
  int64_t vocab_size = 0;   // --vocab-size
  // The flags of the model's shape (kSurfaceShape) given on the command
  // line: --use-checkpoint-args names the ones the checkpoint overrides.
  std::set<std::string> given_shape_flags;
  int64_t layers_per_virtual_stage = 0;  // --num-layers-per-virtual-pipeline-stage
  double comm_timeout = 300;  // --comm-timeout
  bool dry_run = false;         // --dry-run: the planner's memory and step time, then exit
  std::string dry_run_system;  // --dry-run-system ("": this run's calibration of `local`)
  int64_t dry_run_ranks = 0;    // --dry-run-ranks (0: the job's ranks)
  std::string query_group_error;  // check_query_group_flags's verdict, raised on every rank

  // The ranges of these flags (TrainConfig::validate checks the rest).
  void validate() const {
    TESSERA_CHECK(query_group_error.empty(), "{}", query_group_error);
    TESSERA_CHECK(vocab_size == 0 || vocab_size >= 2,
                  "{} must be >= 2 (got {}; leave it out to take the tokenizer's)",
                  flag::vocab_size, vocab_size);
    TESSERA_CHECK(layers_per_virtual_stage >= 0, "{} must be >= 1 (got {})",
                  flag::layers_per_virtual_stage, layers_per_virtual_stage);
    TESSERA_CHECK(std::isfinite(comm_timeout) && comm_timeout >= 0,
                  "--comm-timeout must be a finite number >= 0 (got {})", comm_timeout);
    TESSERA_CHECK(dry_run_ranks >= 0 && dry_run_ranks <= (int64_t(1) << 24),
                  "--dry-run-ranks must be in [0, 2^24] (got {})", dry_run_ranks);
    TESSERA_CHECK(dry_run_ranks == 0 || dry_run, "--dry-run-ranks: only with --dry-run");
  }
};

// The flags of the launch rather than of TrainConfig.
void add_launch_options(CLI::App* sub, LaunchFlags& f) {
  // A field of the model's (kOptionElsewhere): the data decides the vocabulary.
  sub->add_option(flag::vocab_size, f.vocab_size, model_field(flag::vocab_size).help);
  sub->add_option(flag::layers_per_virtual_stage, f.layers_per_virtual_stage,
                  "layers per model chunk (sets --virtual-pipeline-stages)");
  sub->add_option("--comm-timeout", f.comm_timeout,
                  "seconds a collective may take before the watchdog reports the ranks behind "
                  "and aborts the job (0: no watchdog)")
      ->capture_default_str();
  sub->add_flag("--dry-run", f.dry_run,
                "check the configuration, print the planner's memory per rank and step time "
                "for it (tessera plan), and exit before allocating the model");
  sub->add_option("--dry-run-system", f.dry_run_system,
                  "--dry-run: the planner's system (name or .toml, as tessera plan --system; "
                  "default: this machine calibrated for this run, as tessera plan --config)");
  sub->add_option("--dry-run-ranks", f.dry_run_ranks,
                  "--dry-run: plan for this many ranks instead of the job's (no mpirun needed)");
}

// --num-layers-per-virtual-pipeline-stage sets --virtual-pipeline-stages.
void apply_layers_per_virtual_stage(TrainConfig& c, int64_t per) {
  if (per <= 0) return;
  const std::string what = fmt::format("{} x {}", flag::layers_per_virtual_stage, flag::pp);
  const int64_t chunk = checked_mul(per, c.par.pp, what.c_str());
  TESSERA_CHECK(c.model.num_layers % chunk == 0, "{} ({}) must be divisible by {} ({}) x {} ({})",
                flag::num_layers, c.model.num_layers, flag::layers_per_virtual_stage, per,
                flag::pp, c.par.pp);
  c.par.virtual_stages = c.model.num_layers / chunk;
}

// Rank 0 prints every rank's bytes of model state (and activations), which
// the ZeRO formula predicts exactly.
void print_memory_table(comm::Communicator& world, const comm::Grid& grid, const Trainer& t,
                        const TrainConfig& c) {
  const auto all = t.memory_by_rank();  // collective
  if (world.rank() != 0) return;
  fmt::print("memory per rank (MB): model state = parameters + gradients + optimizer "
             "(ZeRO-{}); activations in flight\n",
             c.par.zero_stage);
  fmt::print("  rank   tp pp dp   parameters  gradients  optimizer   total   activations\n");
  for (int r = 0; r < world.size(); ++r) {
    const auto& b = all[size_t(r)];
    comm::GridCoord x = grid.layout().coord_of(r);
    fmt::print("  {:>4}   {:>2} {:>2} {:>2}   {:>10.1f} {:>10.1f} {:>10.1f} {:>7.1f}   {:>11.1f}\n",
               r, x.tp, x.pp, x.dp, b.params / 1e6, b.grads / 1e6, b.optimizer / 1e6,
               b.state() / 1e6, b.activations / 1e6);
  }
}

// Returns the exit status of a run that ended without an error: 0, or
// 128 + signal after --exit-signal-handler stopped it.
int run_train(TrainConfig c, const LaunchFlags& flags) {
  // The one writer of --save, claimed before MPI start-up (about a second on
  // a loaded node), so that a second run into a directory being written is
  // refused at once (run_outputs.h).
  SaveDirClaim save;
  if (!flags.dry_run) save.before_mpi(c, comm::launch_rank());
  comm::MpiRuntime runtime(nullptr, nullptr);
  std::unique_ptr<comm::Communicator> world = runtime.world();
  const bool log = world->rank() == 0;
  TrainingData data;
  std::vector<std::string> load_notes;
  // Everything that can fail on bad input runs first, on every rank; the
  // ranks agree before anything collective, so none is left waiting.
  // --dry-run --dry-run-ranks N checks and plans an N-rank job from one process.
  const int64_t ranks = flags.dry_run_ranks > 0 ? flags.dry_run_ranks : world->size();
  // --save's lock is agreed on first, on its own: rank 0's refusal (one
  // line from rank 0, exit 2 on every rank) waits for no data or model setup.
  agree(*world, [&] {
    flags.validate();
    if (!flags.dry_run) save.take(c, world->rank());
  });
  agree(*world, [&] {
    c.par.set_world(ranks);  // checks tp, pp >= 1 before they divide anything
    // --load's metadata (sizes only, no checksums: Trainer::load verifies):
    // --use-checkpoint-args takes the model's shape from it before anything
    // is derived from the shape.
    std::optional<ckpt::Checkpoint> loaded;
    int64_t vocab_flag = flags.vocab_size;
    if (!c.load_dir.empty()) {
      loaded = ckpt::open_checkpoint(c.load_dir, /*verify=*/false);
      if (c.use_checkpoint_args) {
        if (flags.vocab_size > 0) c.model.vocab_size = flags.vocab_size;  // to compare
        load_notes = apply_checkpoint_args(c, *loaded, flags.given_shape_flags);
        vocab_flag = c.model.vocab_size;
      }
    }
    apply_layers_per_virtual_stage(c, flags.layers_per_virtual_stage);
    c.model.vocab_size = 2;  // the data decides; check everything else first
    c.validate(ranks);
    omp_set_num_threads(c.threads > 0 ? c.threads : comm::default_threads_per_rank());
    // A resumed or fine-tuned model keeps reading its own tokenizer's ids.
    data = open_training_data(
        c, vocab_flag,
        loaded ? data::model_tokenizer("the checkpoint " + loaded->path, loaded->run.tokenizer,
                                       loaded->run.tokenizer_hash)
               : data::TokenizerId{});
    c.model.vocab_size = data.vocab_size;
    c.tokenizer = data.tokenizer_dir;
    c.tokenizer_hash = data.tokenizer_hash;
    c.vocab_file = data.vocab_file;  // absolute; the embedded corpus's when no flag named one
    c.merge_file = data.merge_file;
    c.validate(ranks);
    if (flags.dry_run) {  // the plan of this run, nothing allocated, no output written
      // The threads a rank runs: OpenMP's count, set above, unless these
      // are not the job's ranks (--dry-run-ranks) and --threads is not given.
      const int64_t threads =
          c.threads > 0 ? c.threads : ranks == world->size() ? omp_get_max_threads() : 0;
      if (log) print_dry_run(c, ranks, threads, flags.dry_run_system);
      return;
    }
    // No optimizer state to resume, another seed, another model: before
    // anything is allocated.
    if (loaded) check_load_options(c, *loaded);
    const comm::GridCoord at = comm::GridLayout::make(c.par, world->size()).coord_of(world->rank());
    check_memory_fits(rank_memory_lower_bound(c, at.tp, at.pp), available_memory_bytes(),
                      comm::ranks_on_this_node());
    check_run_outputs(c, world->rank());  // --save, --metrics-file, --trace: before step 1
  });
  if (flags.dry_run) return 0;
  agree(*world, [&] {
    if (const std::string note = log ? claim_save_dir(c) : ""; !note.empty())
      fmt::print("{}\n", note);
  });
  if (flags.comm_timeout > 0) runtime.set_comm_timeout(flags.comm_timeout);
  comm::Grid grid(*world, c.par);
  if (log) {
    if (world->size() > 1) fmt::print("{}", comm::format_layout_table(grid.layout()));
    for (const std::string& n : load_notes) fmt::print("{}\n", n);
    if (!data.note.empty()) fmt::print("data: {}\n", data.note);
    fmt::print("data: {}\n", data.batches->describe());
    fmt::print("model: {} | {:.2f} M parameters\n", c.model.summary(),
               double(ParamLayout::count_model_params(c.model)) / 1e6);
    fmt::print("batch: {} | {} tokens per step | {} rank(s) x {} threads\n", c.par.summary(),
               c.par.global_batch * c.model.seq_length, world->size(), omp_get_max_threads());
    if (c.precision() == Precision::Bf16) {
      const std::string impl =
          kernels::bf16_gemm_impl(c.par.micro_batch * c.model.seq_length, c.model.hidden_size,
                                  3 * c.model.hidden_size);
      fmt::print("precision: {}{}; fp32 accumulation, master weights, optimizer, activations, "
                 "attention, layernorm, softmax, loss\n",
                 kernels::lowp_gemm_path_description(Precision::Bf16),
                 impl.empty() ? "" : fmt::format(", matmul {}", impl));
      fmt::print("gradients: accumulated in fp32, data-parallel reductions in {}{}\n",
                 c.grad_reduce_bf16 ? "bf16 (--grad-reduce-in-bf16)" : "fp32",
                 c.par.zero_stage == 3 ? "; ZeRO-3 gathers parameters in bf16" : "");
    } else if (c.precision() == Precision::Fp16) {
      fmt::print("precision: fp16 GEMM inputs, fp32 accumulation: {}; dynamic loss scaling; fp32 "
                 "master weights, optimizer, activations and everything else\n",
                 kernels::lowp_gemm_path_description(Precision::Fp16));
    }
  }
  std::unique_ptr<Trainer> trainer;
  agree(*world, [&] { trainer = std::make_unique<Trainer>(c, *data.batches, world.get(), &grid); });
  print_memory_table(*world, grid, *trainer, c);
  if (log) {
    const Peak& peak = trainer->peak();
    fmt::print("peak for MFU: {:.3f} TFLOP/s per rank, {}\n", peak.tflops, peak.source);
    fmt::print("measured GEMM peak: {}\n",
               peak.gemm_tflops > 0
                   ? fmt::format("{:.3f} TFLOP/s per rank, {}", peak.gemm_tflops, peak.gemm_source)
                   : peak.gemm_source);
    std::fflush(stdout);
  }
  std::optional<EarlyExit> stop;
  try {
    stop = trainer->run();
  } catch (const CollectiveError& e) {
    report_error(*world, e);  // every rank raised it at the same step: a clean exit
    throw ReportedError();
  } catch (const std::exception& e) {
    // This rank alone failed; the others are in, or on their way to, a
    // collective it will never join: end the whole job now.
    end_job_on_rank_error(*world, e);
    throw;  // a world of one: main reports it
  }
  if (!stop) return 0;
  if (log) {
    const std::string line = fmt::format(
        "tessera: stopped after step {} of {}: {}; {}", stop->step, c.train_iters, stop->reason,
        stop->checkpoint.empty() ? "nothing saved (no --save)" : "saved " + stop->checkpoint);
    fmt::print(stop->signal ? stderr : stdout, "{}\n", line);
  }
  return stop->exit_code();
}

}  // namespace

void register_train(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "train a GPT model (flags follow Megatron-LM's names)");
  auto cfg = std::make_shared<TrainConfig>();
  auto flags = std::make_shared<LaunchFlags>();
  // Expanded into flags by main() before parsing (see config_file.h); listed
  // here so --help shows it.
  add_config_file_option(sub);
  add_train_options(sub, *cfg);
  add_launch_options(sub, *flags);
  // FP8 is a plan, not a run: the engine's kernels have no FP8 GEMM on
  // CPUs. Named, so the refusal says so instead of "unknown flag".
  auto fp8 = std::make_shared<bool>(false);
  sub->add_flag("--fp8", *fp8,
                "refused: tessera train does not train in FP8 (`tessera plan --precision fp8` "
                "plans FP8 runs of GPUs)");
  sub->callback([cfg, flags, sub, fp8] {
    TESSERA_CHECK(!*fp8, "--fp8: tessera train does not train in FP8 (its CPU kernels have no "
                  "FP8 GEMM); train with --bf16, and plan FP8 runs of GPUs with `tessera plan "
                  "--precision fp8`");
    for (const Field<GPTConfig>& f : model_fields())
      if (f.on(kSurfaceShape) && sub->get_option(f.flag)->count() > 0)
        flags->given_shape_flags.insert(f.flag);
    try {
      check_query_group_flags(sub, cfg->model);
    } catch (const Error& e) {
      flags->query_group_error = e.what();  // reported inside run_train, once, on every rank
    }
    // A signal's exit status is returned only once run_train's MpiRuntime is
    // gone (MPI_Finalize on every rank), so the checkpoint and the job end
    // cleanly; main() knows only 0 and error exits.
    if (const int status = run_train(*cfg, *flags); status != 0) std::exit(status);
  });
}

namespace {

// A parser of `tessera train`'s flags alone (no callback): for reading a
// train --config file elsewhere (tessera plan) with train's own defaults.
struct TrainFlagsParser {
  CLI::App app;
  CLI::App* sub = nullptr;
  TrainConfig config;
  LaunchFlags flags;
  TrainFlagsParser() {
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    sub = app.add_subcommand("train");
    add_config_file_option(sub);
    add_train_options(sub, config);
    add_launch_options(sub, flags);
  }
};

}  // namespace

bool is_train_flag(const std::string& name) {
  TrainFlagsParser p;
  return name != "config" && p.sub->get_option_no_throw("--" + name) != nullptr;
}

TrainConfig read_train_config(const std::string& path, int64_t* vocab_size_flag) {
  TrainFlagsParser p;
  std::vector<std::string> argv{"tessera", "train", "--config", path};
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  std::vector<std::string> args = expand_config_files(int(cargv.size()), cargv.data(), p.app);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    p.app.parse(int(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    fail("config {}: {}", path, e.what());
  }
  apply_layers_per_virtual_stage(p.config, p.flags.layers_per_virtual_stage);
  try {
    check_query_group_flags(p.sub, p.config.model);
  } catch (const Error& e) {
    fail("config {}: {}", path, e.what());
  }
  if (vocab_size_flag) *vocab_size_flag = p.flags.vocab_size;
  return p.config;
}

}  // namespace tessera::cli
