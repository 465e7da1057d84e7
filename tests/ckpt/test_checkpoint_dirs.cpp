// Whose checkpoints a --save directory holds (save_dir_owner.h), the
// tokenizer copied into every checkpoint (tokenizer_files.h), and output
// files checked before the work and after every write (core/output_file.h):
// issue 15, defects 3, 8 and 9.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "ckpt_test_util.h"
#include "expect_error.h"
#include "tessera/ckpt/checkpoint.h"
#include "tessera/ckpt/durable_io.h"
#include "tessera/ckpt/save_dir_owner.h"
#include "tessera/ckpt/step_dirs.h"
#include "tessera/ckpt/tokenizer_files.h"
#include "tessera/core/output_file.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using namespace ckpt;
using test::ScratchDir;
using test::throws_error_with;

struct TinyModel {
  GPTConfig cfg = test::tiny_gpt();
  ParamLayout layout = ParamLayout::build(cfg, ParallelConfig{}, 0, 0);
  GPT model{cfg, layout};
  TinyModel() { test::fill_random(model.params().f32(), layout.numel(), 5); }
  std::string save(const std::string& dir, int64_t step, const RunInfo& run) {
    return save_checkpoint(dir, whole_rank(model, nullptr), TrainState{step, step, 1, {}}, run);
  }
  std::string save(const std::string& dir, int64_t step) {
    return save(dir, step, RunInfo{cfg, ParallelConfig{}, "bytes"});
  }
};

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::vector<int64_t> step_numbers(const std::vector<std::pair<int64_t, std::string>>& steps) {
  std::vector<int64_t> out;
  for (const auto& s : steps) out.push_back(s.first);
  return out;
}

// ---- defect 9: a --save directory holds one run ----------------------------

TEST(SaveDirOwner, AnEmptyOrMissingDirectoryIsFree) {
  ScratchDir dir("owner_empty");
  EXPECT_TRUE(foreign_steps(dir / "missing", "").empty());
  EXPECT_TRUE(foreign_steps(dir.str(), "").empty());
  // Leftovers of crashed saves and a stray `latest` are no run's steps.
  fs::create_directory(dir / ".step_000005.tmp-123");
  write_text(dir / "latest", "step_000005\n");
  EXPECT_NO_THROW(check_save_dir_owner(dir.str(), "", false));
}

// The look before MPI start-up (train::SaveDirClaim): refused while a
// writer holds the lock (an flock of another open file conflicts even in
// one process), free once it is gone, and it creates nothing.
TEST(SaveDirOwner, ALookAtTheLockRefusesOnlyWhileAWriterHoldsIt) {
  ScratchDir dir("look");
  EXPECT_NO_THROW(check_no_writer(dir / "missing", "--save"));
  EXPECT_FALSE(fs::exists(dir / "missing"));
  {
    const SaveDirLock held(dir.str(), "--save");
    EXPECT_TRUE(throws_error_with([&] { check_no_writer(dir.str(), "--save"); },
                                  {"--save " + dir.str() + " is being written by pid " +
                                   std::to_string(::getpid()) + " on "}));
    // A second writer is refused alike.
    EXPECT_TRUE(throws_error_with([&] { SaveDirLock second(dir.str(), "--save"); },
                                  {"is being written by pid"}));
  }
  EXPECT_NO_THROW(check_no_writer(dir.str(), "--save"));
  EXPECT_NO_THROW(SaveDirLock(dir.str(), "--save"));
}

TEST(SaveDirOwner, AnotherRunsStepsAreRefusedNamingTheWayOut) {
  ScratchDir dir("owner_other");
  TinyModel m;
  m.save(dir.str(), 100);
  m.save(dir.str(), 200);
  EXPECT_EQ(step_numbers(foreign_steps(dir.str(), "")), (std::vector<int64_t>{200, 100}));
  EXPECT_TRUE(throws_error_with([&] { check_save_dir_owner(dir.str(), "", false); },
                                {"--save " + dir.str(), "another run's checkpoints",
                                 "2 steps, the newest step_000200", "--load " + dir.str(),
                                 "--overwrite-save"}));
  // Loading from elsewhere does not make this directory the run's.
  ScratchDir other("owner_other_src");
  m.save(other.str(), 50);
  EXPECT_TRUE(throws_error_with(
      [&] { check_save_dir_owner(dir.str(), other.str(), false); }, {"another run's"}));
  EXPECT_NO_THROW(check_save_dir_owner(dir.str(), "", true));
}

TEST(SaveDirOwner, ResumingFromTheSameDirectoryIsAllowedHoweverItIsSpelled) {
  ScratchDir dir("owner_resume");
  TinyModel m;
  m.save(dir.str(), 100);
  for (const std::string& load :
       {dir.str(), dir.str() + "/", dir.str() + "/./", (dir.path / ".." / dir.path.filename()).string()})
    EXPECT_TRUE(foreign_steps(dir.str(), load).empty()) << load;
  // Relative to the working directory, as a user types it.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path.parent_path());
  EXPECT_TRUE(foreign_steps(dir.path.filename().string(), dir.str()).empty());
  fs::current_path(cwd);
  // A step past `latest` (a save killed before `latest` moved) is the same
  // run's: it is replaced when the resumed run gets there.
  fs::create_directory(dir / "step_000300");
  EXPECT_TRUE(foreign_steps(dir.str(), dir.str()).empty());
}

TEST(SaveDirOwner, ARewindToAnOlderStepOwnsOnlyTheStepsUpToIt) {
  ScratchDir dir("owner_rewind");
  TinyModel m;
  for (int64_t s : {100, 200, 300}) m.save(dir.str(), s);
  EXPECT_EQ(step_numbers(foreign_steps(dir.str(), dir / "step_000100")),
            (std::vector<int64_t>{300, 200}));
  EXPECT_TRUE(foreign_steps(dir.str(), dir / "step_000300").empty());
  EXPECT_TRUE(throws_error_with(
      [&] { check_save_dir_owner(dir.str(), dir / "step_000100", false); },
      {"newer than --load", "2 steps, the newest step_000300", "--overwrite-save"}));

  // --overwrite-save: the newer steps go, `latest` names the resumed step.
  EXPECT_EQ(remove_foreign_steps(dir.str(), dir / "step_000100"), 2);
  EXPECT_EQ(step_numbers(list_steps(dir.str())), (std::vector<int64_t>{100}));
  EXPECT_EQ(read_latest(dir.str()), "step_000100");
  EXPECT_EQ(open_checkpoint(dir.str()).state.step, 100);
  for (const auto& de : fs::directory_iterator(dir.path))
    EXPECT_FALSE(de.path().filename().string().starts_with(".trash-")) << de.path();
}

TEST(SaveDirOwner, OverwriteRemovesEveryStepAndLatestOfAnotherRun) {
  ScratchDir dir("owner_overwrite");
  TinyModel m;
  for (int64_t s : {1000, 900}) m.save(dir.str(), s);
  EXPECT_EQ(remove_foreign_steps(dir.str(), ""), 2);
  EXPECT_TRUE(list_steps(dir.str()).empty());
  EXPECT_FALSE(fs::exists(dir / "latest"));
  // The new run's history is then the only one: keep-last-2 keeps its steps
  // (before, the old run's step 1000 and 900 outranked them and the new
  // run's step 100 was pruned at step 200).
  for (int64_t s : {100, 200, 300})
    save_checkpoint(dir.str(), whole_rank(m.model, nullptr), TrainState{s, s, 1, {}},
                    RunInfo{m.cfg, ParallelConfig{}, "bytes"}, SaveOptions{2, nullptr});
  EXPECT_EQ(step_numbers(list_steps(dir.str())), (std::vector<int64_t>{300, 200}));
  EXPECT_EQ(remove_foreign_steps(dir.str(), dir.str()), 0);  // its own: nothing to remove
}

// ---- defect 8: the tokenizer travels inside the checkpoint -----------------

struct BpeFiles {
  std::string dir, vocab, merges;
  explicit BpeFiles(const std::string& d, const std::string& merges_text = "#version: 0.2\na b\n")
      : dir(d), vocab(d + "/vocab.json"), merges(d + "/merges.txt") {
    write_text(vocab, R"({"a": 0, "b": 1, "ab": 2})");
    write_text(merges, merges_text);
  }
};

TEST(TokenizerFiles, AreCopiedAndTheCheckpointReadsItsOwnCopy) {
  ScratchDir dir("tok_copy");
  BpeFiles src(dir / "source_tokenizer");
  TinyModel m;
  const std::string step = m.save(dir / "ckpt", 3, RunInfo{m.cfg, ParallelConfig{}, src.dir});
  EXPECT_EQ(ckpt::read_file(step + "/tokenizer/vocab.json"), ckpt::read_file(src.vocab));
  EXPECT_EQ(ckpt::read_file(step + "/tokenizer/merges.txt"), ckpt::read_file(src.merges));

  // The source moves away: the checkpoint still names a tokenizer that exists.
  fs::remove_all(src.dir);
  Checkpoint ck = open_checkpoint(dir / "ckpt");
  EXPECT_EQ(ck.run.tokenizer, step + "/tokenizer");
  EXPECT_TRUE(fs::exists(ck.run.tokenizer + "/vocab.json"));
  // The source is still recorded, absolute.
  EXPECT_EQ(ck.metadata["tokenizer"], src.dir);
  EXPECT_TRUE(ck.metadata["tokenizer_files"].contains("merges.txt"));
}

TEST(TokenizerFiles, ARelativeSourceIsRecordedAbsolute) {
  ScratchDir dir("tok_relative");
  BpeFiles src(dir / "tok");
  TinyModel m;
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path);
  m.save("ckpt", 1, RunInfo{m.cfg, ParallelConfig{}, "tok"});
  fs::current_path(cwd);
  EXPECT_EQ(open_checkpoint(dir / "ckpt").metadata["tokenizer"], dir / "tok");
}

TEST(TokenizerFiles, FilesNotNamedVocabJsonAreCopiedUnderTheStandardNames) {
  ScratchDir dir("tok_megatron_names");
  write_text(dir / "gpt2-vocab.json", R"({"a": 0})");
  write_text(dir / "gpt2-merges.txt", "#version: 0.2\n");
  TinyModel m;
  const std::string step = m.save(dir / "ckpt", 1,
                                  RunInfo{m.cfg, ParallelConfig{}, dir.str(), dir / "gpt2-vocab.json",
                                          dir / "gpt2-merges.txt"});
  EXPECT_EQ(ckpt::read_file(step + "/tokenizer/vocab.json"), R"({"a": 0})");
  EXPECT_EQ(ckpt::read_file(step + "/tokenizer/merges.txt"), "#version: 0.2\n");
}

TEST(TokenizerFiles, ADamagedCopyIsCaughtLikeAnyCheckpointFile) {
  ScratchDir dir("tok_damaged");
  BpeFiles src(dir / "tok");
  TinyModel m;
  const std::string step = m.save(dir / "ckpt", 1, RunInfo{m.cfg, ParallelConfig{}, src.dir});
  write_text(step + "/tokenizer/merges.txt", "#version: 0.2\nb a\n");  // same size, other bytes
  EXPECT_TRUE(throws_error_with([&] { verify_checkpoint(step); },
                                {step + "/tokenizer/merges.txt", "checksum"}));
  write_text(step + "/tokenizer/merges.txt", "#version: 0.2\na b\n");  // repaired
  EXPECT_NO_THROW(verify_checkpoint(step));
  fs::remove(step + "/tokenizer/vocab.json");
  EXPECT_TRUE(throws_error_with([&] { verify_checkpoint(step); },
                                {step + "/tokenizer/vocab.json", "missing"}));
}

TEST(TokenizerFiles, AResumeWithAnotherTokenizerIsRefused) {
  ScratchDir dir("tok_resume");
  BpeFiles same(dir / "same"), other(dir / "other", "#version: 0.2\nb a\n");
  TinyModel m;
  m.save(dir / "ckpt", 1, RunInfo{m.cfg, ParallelConfig{}, same.dir});
  Checkpoint ck = open_checkpoint(dir / "ckpt");
  EXPECT_NO_THROW(check_same_tokenizer(ck, same.vocab, same.merges));
  EXPECT_TRUE(throws_error_with([&] { check_same_tokenizer(ck, other.vocab, other.merges); },
                                {"another tokenizer", other.merges}));
  EXPECT_NO_THROW(check_same_tokenizer(ck, "", ""));  // byte-level data: nothing to compare
}

TEST(TokenizerFiles, AMissingSourceIsNamedBeforeTheSave) {
  ScratchDir dir("tok_missing");
  TinyModel m;
  RunInfo run{m.cfg, ParallelConfig{}, dir / "nowhere"};
  EXPECT_TRUE(throws_error_with([&] { check_tokenizer_sources(run); },
                                {dir / "nowhere/vocab.json"}));
  EXPECT_NO_THROW(check_tokenizer_sources(RunInfo{m.cfg, ParallelConfig{}, "bytes"}));
  EXPECT_NO_THROW(check_tokenizer_sources(RunInfo{m.cfg, ParallelConfig{}, ""}));
}

TEST(TokenizerFiles, ByteLevelAndOlderCheckpointsCopyNothing) {
  ScratchDir dir("tok_bytes");
  TinyModel m;
  const std::string step = m.save(dir.str(), 1);
  EXPECT_FALSE(fs::exists(step + "/tokenizer"));
  Checkpoint ck = open_checkpoint(dir.str());
  EXPECT_EQ(ck.run.tokenizer, "bytes");
  EXPECT_FALSE(ck.metadata.contains("tokenizer_files"));
}

// ---- defect 3: outputs checked before the work, writes checked after -------

TEST(OutputFile, UnwritablePathsAreRefusedUpFrontNamingTheFlag) {
  ScratchDir dir("out_check");
  EXPECT_TRUE(throws_error_with([&] { check_output_file(dir.str(), "--metrics-file"); },
                                {"--metrics-file " + dir.str(), "is a directory"}));
  EXPECT_TRUE(throws_error_with([&] { check_output_file("/proc/nope/m.jsonl", "--trace"); },
                                {"--trace /proc/nope/m.jsonl"}));
  write_text(dir / "file", "x");
  EXPECT_TRUE(throws_error_with([&] { check_output_dir(dir / "file", "--save", "t"); },
                                {"--save " + dir / "file"}));
  EXPECT_TRUE(throws_error_with([&] { check_output_dir("/proc/nope/ckpt", "--save", "t"); },
                                {"--save /proc/nope/ckpt", "cannot create"}));
}

TEST(OutputFile, ANamedPipeWithoutReaderIsRefusedNotWaitedOn) {
  ScratchDir dir("out_fifo");
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  EXPECT_TRUE(throws_error_with([&] { check_output_file(dir / "pipe", "--metrics-file"); },
                                {"named pipe with no reader"}));
}

TEST(OutputFile, TheCheckCreatesParentsAndLeavesNoFileBehind) {
  ScratchDir dir("out_parents");
  const std::string path = dir / "a/b/metrics.jsonl";
  check_output_file(path, "--metrics-file");
  EXPECT_TRUE(fs::is_directory(dir / "a/b"));
  EXPECT_FALSE(fs::exists(path));
  // An existing file's content is left alone (a resumed run appends to
  // nothing here; the check only opens it).
  write_text(path, "keep");
  check_output_file(path, "--metrics-file");
  EXPECT_EQ(ckpt::read_file(path), "keep");
  check_output_dir(dir / "ckpt", "--save", "probe");
  EXPECT_TRUE(fs::is_directory(dir / "ckpt"));
  EXPECT_TRUE(fs::is_empty(dir / "ckpt"));
}

TEST(OutputFile, AFullDiskIsAnErrorNotATruncatedFile) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  EXPECT_NO_THROW(check_output_file("/dev/full", "--json"));  // it opens; writing fails
  EXPECT_TRUE(throws_error_with(
      [&] { write_output_file("/dev/full", std::string(100000, 'x'), "--json"); },
      {"--json /dev/full", "write failed"}));
  // Small enough to sit in the stdio buffer: the failure shows at the flush.
  EXPECT_TRUE(throws_error_with([&] { write_output_file("/dev/full", "{}\n", "--trace"); },
                                {"--trace /dev/full", "write failed"}));
  ScratchDir dir("out_ok");
  write_output_file(dir / "x/y.json", "{}\n", "--json");
  EXPECT_EQ(ckpt::read_file(dir / "x/y.json"), "{}\n");
}

}  // namespace
}  // namespace tessera
